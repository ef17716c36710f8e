//! Plain core-level regressions for the counterexamples the model checker found: the real
//! `Producer` driven by hand, with a minimal in-process responder and hand-made error answers.

mod harness;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use harness::{
    api_of, deliveries, epoch_and_sequence, produce_error, produce_error_with_log_start,
    produce_of, produce_rewrite, respond, Harness, TOPIC,
};
use kprod_core::protocol::metadata::MetadataRequest;
use kprod_core::protocol::{api_key, decode_response, encode_response, ErrorCode};
use kprod_core::{ConnId, DeliveryError, Diagnostic, Event, Output, Persistence, Record, RecordId};

impl Harness {
    fn failures(&self) -> Vec<(DeliveryError, Persistence)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Failed {
                    error, persisted, ..
                } => Some((error.clone(), *persisted)),
                _ => None,
            })
            .collect()
    }

    /// A record of each value sent to partition 0 and flushed on its own: one Produce
    /// request each, all in flight. Returns the records' ids and the requests.
    fn each_in_its_own_request(&mut self, values: &[&str]) -> (Vec<RecordId>, Vec<Bytes>) {
        let mut ids = Vec::new();
        let mut requests = Vec::new();
        for v in values {
            ids.push(self.p.send(self.now, record(v)).unwrap());
            self.p.flush(self.now);
            self.drain();
            requests.push(self.next_frame().expect("a Produce request"));
        }
        (ids, requests)
    }
}

fn record(v: &str) -> Record {
    Record::new(TOPIC, v.to_owned()).with_partition(0)
}

/// How many of `frames` are Produce requests.
fn produce_requests(frames: &[Bytes]) -> usize {
    (frames.iter())
        .filter(|f| api_of(f).0 == api_key::PRODUCE)
        .count()
}

/// Answers each of `frames` as the broker would, in order.
fn acknowledge(h: &mut Harness, frames: Vec<Bytes>) {
    for f in frames {
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
}

/// Model counterexample (S4): a batch written by the broker whose answer was lost to a
/// disconnect, then refused on its retry, was reported not persisted.
#[test]
fn a_refusal_after_an_unanswered_attempt_is_possibly_persisted() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    let first = h.next_frame().expect("produce request");
    assert_eq!(api_of(&first).0, api_key::PRODUCE);
    // The broker appends the batch; the answer is lost.
    let _written = respond(&first, &mut h.next_offset);
    let conn = h.conn.unwrap();
    h.p.handle_disconnected(h.now, conn);
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.drain();
    // Reconnect: answer the handshake, then refuse the retry.
    loop {
        let f = h.next_frame().expect("a request after the reconnect");
        if api_of(&f).0 == api_key::PRODUCE {
            h.feed(produce_error(&f, ErrorCode::InvalidRecord));
            break;
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    assert_eq!(
        h.failures(),
        vec![(
            DeliveryError::Broker(ErrorCode::InvalidRecord),
            Persistence::PossiblyPersisted
        )]
    );
}

/// Model counterexample (S9): a topic missing from one metadata answer failed its records.
#[test]
fn a_topic_missing_from_one_metadata_answer_fails_nothing() {
    let mut h = Harness::new(|c| c.allow_auto_topic_creation = false);
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    let mut flapped = false;
    while let Some(f) = h.next_frame() {
        let (key, version, corr) = api_of(&f);
        let mut a = respond(&f, &mut h.next_offset);
        if key == api_key::METADATA && !flapped {
            flapped = true;
            let (_, mut m) = decode_response::<MetadataRequest>(version, a.slice(4..)).unwrap();
            m.topics[0].error_code = ErrorCode::UnknownTopicOrPartition.as_i16();
            m.topics[0].partitions.clear();
            a = encode_response::<MetadataRequest>(&m, version, corr);
        }
        h.feed(a);
        if flapped && h.next_frame_pending() {
            continue;
        }
        // The producer retries metadata after its backoff.
        h.now += Duration::from_millis(200);
        h.p.handle_timeout(h.now);
        h.drain();
    }
    assert!(flapped);
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0, "delivered after the flap");
}

impl Harness {
    fn next_frame_pending(&self) -> bool {
        self.partial.len() >= 4
    }
}

/// Model counterexample (L4, S9): UNKNOWN_PRODUCER_ID after the broker forgot an idle
/// producer was reported as data loss. It is benign: a new epoch, and the batch goes again.
#[test]
fn unknown_producer_id_after_idle_expiry_is_benign() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    let f = h.next_frame().expect("produce");
    h.feed(produce_error(&f, ErrorCode::UnknownProducerId));
    h.answer_all();
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0);
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, Event::Diagnostic(Diagnostic::DataLoss { .. }))));
    assert_eq!(h.p.metrics().data_loss_signals, 0);
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, Event::Diagnostic(Diagnostic::EpochBumped(_)))));
    // b was sent again under the new epoch: a retry (it was not counted before).
    let m = h.p.metrics();
    assert_eq!((m.batches_sent, m.retries), (3, 1), "{m:?}");
}

/// KIP-511: a broker that does not speak our ApiVersions version answers at v0 with
/// UNSUPPORTED_VERSION and its own range; the producer retries at the highest common version
/// and goes on to produce.
#[test]
fn api_versions_falls_back_to_the_brokers_highest_version() {
    use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    let f = h.next_frame().expect("ApiVersions");
    let (key, version, corr) = api_of(&f);
    assert_eq!((key, version), (api_key::API_VERSIONS, 3));
    let refusal = ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.as_i16(),
        api_keys: vec![ApiVersion {
            api_key: api_key::API_VERSIONS,
            min_version: 0,
            max_version: 2,
        }],
        throttle_time_ms: 0,
    };
    h.feed(encode_response::<ApiVersionsRequest>(&refusal, 0, corr));
    let again = h.next_frame().expect("a second ApiVersions");
    assert_eq!(api_of(&again).0, api_key::API_VERSIONS);
    assert_eq!(
        api_of(&again).1,
        2,
        "retried at the broker's highest version"
    );
    let a = respond(&again, &mut h.next_offset);
    h.feed(a);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "produced after the fallback");
    assert!(h.failures().is_empty());
}

impl Harness {
    /// Every whole request written so far, split off the connection's buffer.
    fn frames(&mut self) -> Vec<Bytes> {
        std::iter::from_fn(|| self.next_frame()).collect()
    }
}

/// Model counterexample (S9, KAFKA-15591 after idle expiry): after the partition idled longer
/// than the broker keeps producer state, the producer pipelined two batches; the first drew
/// NOT_ENOUGH_REPLICAS, a broker that had forgotten the producer (2.5–4.4) accepted the second
/// at its gap, and the first could then only fail, not persisted, with no permanent error.
/// After such an idle period the first batch goes alone until it is acknowledged.
#[test]
fn after_idling_past_the_state_expiry_the_first_batch_goes_alone() {
    let expiry = Duration::from_secs(60);
    let mut h = Harness::new(|c| c.producer_id_expiration = Some(expiry));
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);

    // Busy partition (idle below the expiry): two batches are pipelined.
    h.now += expiry / 2;
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    h.p.send(h.now, record("c")).unwrap();
    h.drain();
    let frames = h.frames();
    assert_eq!(
        produce_requests(&frames),
        2,
        "pipelined while the broker surely knows us"
    );
    acknowledge(&mut h, frames);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);

    // Idle past the expiry: the broker may have forgotten the producer.
    h.now += expiry + Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.p.send(h.now, record("d")).unwrap();
    h.drain();
    h.p.send(h.now, record("e")).unwrap();
    h.drain();
    let frames = h.frames();
    assert_eq!(
        produce_requests(&frames),
        1,
        "one probe batch, nothing behind it"
    );
    let probe = frames
        .into_iter()
        .find(|f| api_of(f).0 == api_key::PRODUCE)
        .unwrap();
    // The probe draws a retriable error: still nothing else goes before it is written.
    h.feed(produce_error(&probe, ErrorCode::NotEnoughReplicas));
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.drain();
    let frames = h.frames();
    assert_eq!(produce_requests(&frames), 1, "the probe's retry goes alone");
    acknowledge(&mut h, frames);
    // Acknowledged: the window is open again and the rest follows.
    h.answer_all();
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0);
}

/// The same idle period, spent asleep (a review finding): a suspended machine's monotonic
/// clock (Linux's `CLOCK_MONOTONIC`, which `Instant` reads) stands still, so the producer saw
/// a second where the broker, which dates our state by its wall clock, saw two days and
/// forgot us. The driver reports the wall clock's jump (`handle_wall_clock_jump`), and the
/// first batch after it goes alone, also for records that waited through the suspend.
#[test]
fn after_a_suspend_past_the_state_expiry_the_first_batch_goes_alone() {
    let expiry = Duration::from_secs(60);
    let mut h = Harness::new(|c| {
        c.producer_id_expiration = Some(expiry);
        c.linger = Duration::from_millis(100);
        // Connections idle across the suspend are closed (below); not the point here.
        c.connections_max_idle = None;
    });
    h.p.send(h.now, record("a")).unwrap();
    h.p.flush(h.now);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);

    // A jump within the expiry changes nothing: pipelined.
    h.now += Duration::from_secs(1);
    h.p.handle_wall_clock_jump(h.now, Duration::from_secs(10));
    for v in ["b", "c"] {
        h.p.send(h.now, record(v)).unwrap();
        h.p.flush(h.now);
        h.drain();
    }
    let frames = h.frames();
    assert_eq!(produce_requests(&frames), 2, "pipelined within the expiry");
    acknowledge(&mut h, frames);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);

    // Records lingering when the machine sleeps; a second later by the monotonic clock, two
    // days by the wall clock.
    h.p.send(h.now, record("d")).unwrap();
    h.now += Duration::from_secs(1);
    h.p.handle_wall_clock_jump(h.now, Duration::from_secs(2 * 86_400));
    h.drain();
    h.p.send(h.now, record("e")).unwrap();
    h.p.flush(h.now);
    h.drain();
    let frames = h.frames();
    assert_eq!(
        produce_requests(&frames),
        1,
        "one probe batch, nothing behind it"
    );
    acknowledge(&mut h, frames);
    h.answer_all();
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0);
}

/// Review finding (2026-12-07, time that jumps): a connection's idle time did not count a
/// suspend, so after one longer than the broker's `connections.max.idle.ms` the first request
/// went onto a connection the broker had closed (a reset, its batch retried as possibly
/// written) or, behind a NAT that forgot it, hung for `request.timeout.ms`. Now the idle
/// connections are closed at the jump, and the next record goes on a new one.
#[test]
fn after_a_suspend_past_the_idle_limit_idle_connections_are_closed() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    let opened = h.p.metrics().connections_opened;
    let idle_closes = |h: &Harness| {
        (h.events.iter())
            .filter(|e| {
                matches!(
                    e,
                    Event::Diagnostic(Diagnostic::Disconnected { reason: "idle", .. })
                )
            })
            .count()
    };
    // A jump within the idle limit (540 s) closes nothing.
    h.now += Duration::from_secs(1);
    h.p.handle_wall_clock_jump(h.now, Duration::from_secs(60));
    h.drain();
    assert_eq!(idle_closes(&h), 0);
    h.now += Duration::from_secs(1);
    h.p.handle_wall_clock_jump(h.now, Duration::from_secs(15 * 60));
    h.drain();
    assert_eq!(idle_closes(&h), 2, "{:?}", h.events);
    h.p.send(h.now, record("b")).unwrap();
    h.answer_all();
    assert_eq!(deliveries(&h.events).len(), 2);
    assert!(h.p.metrics().connections_opened > opened);
}

/// A batch in flight across the suspend: nothing new goes behind it until a batch is
/// acknowledged (a review of the change: only partitions with nothing in flight probed).
#[test]
fn after_a_suspend_with_a_batch_in_flight_nothing_goes_behind_it() {
    let expiry = Duration::from_secs(60);
    let mut h = Harness::new(|c| {
        c.producer_id_expiration = Some(expiry);
        c.connections_max_idle = None;
    });
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    let held = h.frames();
    assert_eq!(produce_requests(&held), 1, "b in flight");
    h.now += Duration::from_secs(1);
    h.p.handle_wall_clock_jump(h.now, Duration::from_secs(2 * 86_400));
    h.p.send(h.now, record("c")).unwrap();
    h.drain();
    assert_eq!(produce_requests(&h.frames()), 0, "c waits for b's answer");
    acknowledge(&mut h, held);
    h.answer_all();
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(deliveries(&h.events).len(), 3);
}

/// KIP-219: a Produce answer (v6+) with `throttle_time_ms` asks the client to wait. The
/// producer sends nothing more on that connection until the time has passed (the broker
/// mutes it meanwhile), and wakes itself when it has.
#[test]
fn a_throttled_connection_waits_before_its_next_produce() {
    use kprod_core::Output;

    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    let a = produce_rewrite(&f, &mut h.next_offset, |r| r.throttle_time_ms = 500);
    h.feed(a);
    assert_eq!(h.p.pending_records(), 0, "a delivered");
    assert_eq!(h.p.metrics().produce_throttled, 1);
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    assert!(h.next_frame().is_none(), "nothing sent while throttled");
    let wait = match h.p.poll_output() {
        Output::Wait { until } => until.expect("a deadline"),
        o => panic!("{o:?}"),
    };
    assert_eq!(
        wait,
        h.now + Duration::from_millis(500),
        "woken when the throttle ends"
    );
    h.now = wait;
    h.p.handle_timeout(h.now);
    h.drain();
    let f = h.next_frame().expect("b sent once the throttle passed");
    assert_eq!(api_of(&f).0, api_key::PRODUCE);
}

/// Probe finding: on a topic with `message.timestamp.type=LogAppendTime` the broker stamps
/// each batch with the time it wrote it and answers it (`log_append_time_ms`); the delivery
/// carries it, and carries none for a topic that keeps the records' own times (-1).
#[test]
fn a_delivery_carries_the_brokers_log_append_time() {
    use kprod_core::protocol::produce::ProduceRequest;

    let mut h = Harness::new(|_| {});
    for (value, stamp, expected) in [
        ("a", 1_700_000_000_123, Some(1_700_000_000_123)),
        ("b", -1, None),
    ] {
        h.p.send(h.now, record(value)).unwrap();
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        let (_, version, corr) = api_of(&f);
        let a = respond(&f, &mut h.next_offset);
        let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
        resp.responses[0].partition_responses[0].log_append_time_ms = stamp;
        h.events.clear();
        h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
        let delivered: Vec<_> = (h.events.iter())
            .filter_map(|e| match e {
                Event::Delivered(d) => Some(d.log_append_time),
                _ => None,
            })
            .collect();
        assert_eq!(delivered, [expected], "record {value}");
    }
}

/// Probe finding (a 50 kB/s quota, `request.timeout.ms` 2 s): a broker's throttle is often
/// longer than the request timeout, and the broker reads nothing from the connection until it
/// has passed. The producer waited at most `request.timeout.ms`, so its next request sat
/// unread and timed out (retry, reconnect, records possibly persisted). Now the whole
/// throttle is waited.
#[test]
fn a_throttle_longer_than_the_request_timeout_is_waited_in_full() {
    use kprod_core::protocol::produce::ProduceRequest;

    let mut h = Harness::new(|c| c.request_timeout = Duration::from_secs(2));
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    let (_, version, corr) = api_of(&f);
    let a = respond(&f, &mut h.next_offset);
    let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
    resp.throttle_time_ms = 5_000;
    h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    let wait = match h.p.poll_output() {
        Output::Wait { until } => until.expect("a deadline"),
        o => panic!("{o:?}"),
    };
    assert_eq!(
        wait,
        h.now + Duration::from_secs(5),
        "woken when the throttle ends"
    );
    h.now += Duration::from_millis(4_900);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(
        h.next_frame().is_none(),
        "nothing sent before the throttle ends"
    );
    h.now += Duration::from_millis(100);
    h.p.handle_timeout(h.now);
    h.drain();
    let f = h.next_frame().expect("b sent once the throttle passed");
    assert_eq!(api_of(&f).0, api_key::PRODUCE);
    let b = respond(&f, &mut h.next_offset);
    h.feed(b);
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(h.p.metrics().retries, 0);
}

/// Probe finding: requests pipelined behind a throttled answer are read by the broker only
/// when the throttle ends; they kept their send-time deadline and timed out (the connection
/// was closed and their records retried or failed possibly persisted). Now each request in
/// flight on the connection has the throttle added to its deadline, as the Java client does.
#[test]
fn requests_in_flight_behind_a_throttled_answer_wait_the_throttle_too() {
    use kprod_core::protocol::produce::ProduceRequest;

    let mut h = Harness::new(|c| c.request_timeout = Duration::from_secs(2));
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    let (_, requests) = h.each_in_its_own_request(&["a", "b"]);
    let (_, version, corr) = api_of(&requests[0]);
    let a = respond(&requests[0], &mut h.next_offset);
    let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
    resp.throttle_time_ms = 3_000;
    h.now += Duration::from_millis(500);
    h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
    // Past b's first deadline (2 s after it was sent), short of it plus the throttle.
    h.now += Duration::from_millis(4_000);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_some(), "the connection is kept");
    assert_eq!(h.p.metrics().retries, 0, "b not retried");
    let b = respond(&requests[1], &mut h.next_offset);
    h.feed(b);
    assert_eq!(h.p.pending_records(), 0, "b delivered by its first request");
    assert!(h.failures().is_empty(), "{:?}", h.failures());
}

/// A request written to a throttled connection (here a Metadata request for a new topic, the
/// throttled connection being the only one left) is read by the broker when the throttle
/// ends: its request timeout counts from then, so a throttle longer than the timeout does
/// not close the connection under it.
#[test]
fn a_request_sent_on_a_throttled_connection_times_out_from_the_throttles_end() {
    use kprod_core::protocol::produce::ProduceRequest;

    let mut h = Harness::new(|c| c.request_timeout = Duration::from_secs(2));
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    let leader = h.conn.expect("the leader's connection");
    let (_, version, corr) = api_of(&f);
    let a = respond(&f, &mut h.next_offset);
    let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
    resp.throttle_time_ms = 5_000;
    h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
    // The bootstrap connection goes away: the throttled one is all there is.
    assert_ne!(leader, ConnId(0));
    h.p.handle_disconnected(h.now, ConnId(0));
    h.drain();
    h.conn = Some(leader);
    h.p.send(h.now, Record::new("other", "b")).unwrap();
    h.drain();
    let m = h
        .next_frame()
        .expect("a Metadata request for the new topic");
    assert_eq!(api_of(&m).0, api_key::METADATA);
    assert_eq!(h.conn, Some(leader));
    let closed = |events: &[Event]| {
        (events.iter()).any(|e| {
            matches!(e, Event::Diagnostic(Diagnostic::Disconnected { conn, .. }) if *conn == leader)
        })
    };
    h.now += Duration::from_millis(6_900);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(
        !closed(&h.events),
        "not timed out before 5 s + 2 s: {:?}",
        h.events
    );
    h.now += Duration::from_millis(100);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(closed(&h.events), "timed out 2 s after the throttle ended");
}

/// From a review of multi-broker faults: Kafka may throttle the ApiVersions answer too
/// (`sendResponseMaybeThrottle`), and from v2 the client keeps the throttle (KIP-219, as the
/// Java client does): the broker reads nothing on the connection until it passes. The
/// Metadata request written after it times out 2 s after the throttle's end, not 2 s after
/// it was written. Before, the throttle was ignored and the connection closed as timed out
/// while the broker only muted it.
#[test]
fn a_throttled_api_versions_answer_is_waited_out() {
    use kprod_core::protocol::api_versions::ApiVersionsRequest;

    let mut h = Harness::new(|c| c.request_timeout = Duration::from_secs(2));
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    let f = h.next_frame().expect("the ApiVersions request");
    let (key, version, corr) = api_of(&f);
    assert_eq!(key, api_key::API_VERSIONS);
    assert!(version >= 2, "v{version}");
    let a = respond(&f, &mut h.next_offset);
    let (_, mut resp) = decode_response::<ApiVersionsRequest>(version, a.slice(4..)).unwrap();
    resp.throttle_time_ms = 5_000;
    h.feed(encode_response::<ApiVersionsRequest>(&resp, version, corr));
    h.drain();
    let disconnected = |events: &[Event]| {
        (events.iter()).any(|e| matches!(e, Event::Diagnostic(Diagnostic::Disconnected { .. })))
    };
    h.now += Duration::from_millis(6_900);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(!disconnected(&h.events), "{:?}", h.events);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "a delivered on that connection");
    assert!(!disconnected(&h.events), "{:?}", h.events);
}

/// RECORD_LIST_TOO_LARGE (Kafka's answer to a batch larger than the log's `segment.bytes`)
/// splits a batch of several records, as MESSAGE_TOO_LARGE does (a review finding: it
/// failed every record of the batch for good, which a smaller batch would have delivered);
/// a batch of one record still fails, not persisted.
#[test]
fn record_list_too_large_splits_a_batch_of_several_records() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    for v in ["a1", "a2", "a3", "a4"] {
        h.p.send(h.now, record(v)).unwrap();
    }
    h.p.flush(h.now);
    h.drain();
    let f = h.next_frame().expect("a Produce request");
    h.feed(produce_error(&f, ErrorCode::RecordListTooLarge));
    // Every piece of two or more is refused again: the pieces of one record go through.
    let mut refused = 1;
    for _ in 0..20 {
        h.now += Duration::from_millis(500);
        h.p.handle_timeout(h.now);
        h.drain();
        while let Some(f) = h.next_frame() {
            // A batch's record count: bytes 57–60 of its header.
            let many = api_of(&f).0 == api_key::PRODUCE && {
                let p = &produce_of(&f).topic_data[0].partition_data[0];
                let r = p.records.clone().unwrap();
                i32::from_be_bytes(r[57..61].try_into().unwrap()) > 1
            };
            let a = if many {
                refused += 1;
                produce_error(&f, ErrorCode::RecordListTooLarge)
            } else {
                respond(&f, &mut h.next_offset)
            };
            h.feed(a);
        }
    }
    assert_eq!(refused, 3, "the batch and its two halves");
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(deliveries(&h.events).len(), 5, "x and a1 to a4");
}

/// Review finding: once a partition waits for a rebase (a failed batch left a gap), a retry
/// that was never written goes only under the next epoch. A later batch that may have been
/// written, refused OUT_OF_ORDER_SEQUENCE_NUMBER behind it, was taken as waiting for that
/// earlier retry and retried, over and over, until the delivery timeout failed all of them.
/// Now the gap explains the refusal: that batch fails possibly persisted at once, the
/// partition rebases, and the never-written records are delivered under the new epoch.
#[test]
fn a_possibly_written_batch_refused_behind_a_gap_does_not_stall_the_partition() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);
    // A (three records), B and C: three Produce requests in flight.
    let mut requests = Vec::new();
    for batch in [&["a1", "a2", "a3"][..], &["b"], &["c"]] {
        for v in batch {
            h.p.send(h.now, record(v)).unwrap();
        }
        h.p.flush(h.now);
        h.drain();
        requests.push(h.next_frame().expect("a Produce request"));
    }
    // A is too large (split into two never-written halves, waiting for their backoff), B is
    // refused for good (a gap: the partition must rebase), and C's answer is lost.
    h.feed(produce_error(&requests[0], ErrorCode::MessageTooLarge));
    h.feed(produce_error(&requests[1], ErrorCode::InvalidRecord));
    let conn = h.conn.unwrap();
    h.p.handle_disconnected(h.now, conn);
    // The broker never saw A or B, so anything under the old epoch past x is out of order.
    let old_epoch = epoch_and_sequence(&requests[2]).0;
    for _ in 0..20 {
        h.now += Duration::from_millis(500);
        h.p.handle_timeout(h.now);
        h.drain();
        while let Some(f) = h.next_frame() {
            let a = if api_of(&f).0 == api_key::PRODUCE && epoch_and_sequence(&f).0 == old_epoch {
                produce_error(&f, ErrorCode::OutOfOrderSequenceNumber)
            } else {
                respond(&f, &mut h.next_offset)
            };
            h.feed(a);
        }
    }
    assert_eq!(
        h.p.pending_records(),
        0,
        "the partition went on after the gap"
    );
    assert_eq!(
        h.failures(),
        vec![
            (
                DeliveryError::Broker(ErrorCode::InvalidRecord),
                Persistence::NotPersisted
            ),
            (
                DeliveryError::Broker(ErrorCode::OutOfOrderSequenceNumber),
                Persistence::PossiblyPersisted
            ),
        ]
    );
    assert_eq!(deliveries(&h.events).len(), 4, "x, a1, a2 and a3");
}

/// Review finding: under acks=all Kafka answers NOT_LEADER_OR_FOLLOWER also after it
/// appended the batch, when leadership moved while the batch waited for its followers (one
/// of which may hold it and lead now). Such a batch that then reaches its delivery timeout
/// was reported not persisted; it is possibly persisted. (The model shows the duplicate the
/// old reading also made: `catches_not_leader_after_the_append_taken_as_not_persisted`.)
#[test]
fn not_leader_under_acks_all_is_possibly_persisted() {
    for (acks, expected) in [
        (-1, Persistence::PossiblyPersisted),
        (1, Persistence::NotPersisted),
    ] {
        let mut h = Harness::new(|c| {
            c.acks = acks;
            c.enable_idempotence = acks == -1;
        });
        h.p.send(h.now, record("x")).unwrap();
        h.answer_all();
        h.p.send(h.now, record("a")).unwrap();
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, ErrorCode::NotLeaderOrFollower));
        // Nothing is answered any more; the delivery timeout passes.
        h.now += Duration::from_secs(200);
        h.p.handle_timeout(h.now);
        h.drain();
        assert_eq!(
            h.failures(),
            vec![(
                DeliveryError::DeliveryTimeout {
                    last_error: Some(ErrorCode::NotLeaderOrFollower)
                },
                expected
            )],
            "acks={acks}"
        );
    }
}

/// Review finding (recovery without restart, a seventh session of 2026-12-07): records that
/// waited for a producer id whose requests were each lost with their connection failed at
/// their delivery timeout with no cause named (`last_error: None`, as if they had waited
/// their turn). They name the loss now.
#[test]
fn records_waiting_for_an_id_lost_with_its_connections_say_so_at_their_timeout() {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
    // The connection reset with the request on it; or the answer broken (no id), which
    // closes it (the review of the fix: that path cleared the cause).
    for reset in [true, false] {
        let mut h = Harness::new(|c| {
            c.delivery_timeout = Duration::from_secs(5);
            c.request_timeout = Duration::from_secs(2);
        });
        h.p.send(h.now, record("a")).unwrap();
        let mut broken = 0;
        for _ in 0..40 {
            h.drain();
            while let Some(f) = h.conn.and_then(|_| h.next_frame()) {
                let (key, version, corr) = api_of(&f);
                let a = if key != api_key::INIT_PRODUCER_ID {
                    respond(&f, &mut h.next_offset)
                } else if reset {
                    broken += 1;
                    h.p.handle_disconnected(h.now, h.conn.take().unwrap());
                    h.drain();
                    continue;
                } else {
                    broken += 1;
                    let bad = InitProducerIdResponse {
                        throttle_time_ms: 0,
                        error_code: 0,
                        producer_id: -1,
                        producer_epoch: 0,
                    };
                    encode_response::<InitProducerIdRequest>(&bad, version, corr)
                };
                h.feed(a);
            }
            h.now += Duration::from_millis(200);
            h.p.handle_timeout(h.now);
        }
        assert!(broken >= 2, "{broken} InitProducerId requests lost");
        assert_eq!(
            h.failures(),
            vec![(
                DeliveryError::DeliveryTimeout {
                    last_error: Some(ErrorCode::NetworkException)
                },
                Persistence::NotPersisted
            )],
            "reset: {reset}"
        );
    }
}

/// An InitProducerId answer that claims success without a producer id (-1) is a broken
/// answer: an error on its connection, which is closed, and the request is made again after
/// the backoff. It used to stop the producer for good.
#[test]
fn an_init_producer_id_answer_without_an_id_is_an_error_on_its_connection() {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    let mut broken = 0;
    while let Some(f) = h.next_frame() {
        let (key, version, corr) = api_of(&f);
        if key == api_key::INIT_PRODUCER_ID && broken == 0 {
            broken += 1;
            let bad = InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: 0,
                producer_id: -1,
                producer_epoch: 0,
            };
            h.feed(encode_response::<InitProducerIdRequest>(
                &bad, version, corr,
            ));
            if h.conn.is_none() {
                break;
            }
            continue;
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    assert_eq!(broken, 1);
    assert!(
        h.events.iter().any(|e| matches!(
            e,
            Event::Diagnostic(Diagnostic::Disconnected {
                reason: "InitProducerId answer without a producer id",
                ..
            })
        )),
        "{:?}",
        h.events
    );
    for _ in 0..10 {
        h.now += Duration::from_millis(200);
        h.p.handle_timeout(h.now);
        h.answer_all();
    }
    assert!(h.p.fatal_error().is_none(), "{:?}", h.p.fatal_error());
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(
        h.p.pending_records(),
        0,
        "delivered under the id asked for again"
    );
}

/// A broker that lost every producer's state and takes no batch under an old producer id at
/// any epoch (Tansu restarted with its memory storage) answers UNKNOWN_PRODUCER_ID even at
/// sequence 0 of a new epoch: the producer asks for a new producer id instead of bumping
/// again. Before, it bumped its epoch locally at every such answer, with no backoff, until
/// the epoch ran out (32,767 requests; a review measured 2,100 a second against Tansu), and
/// every record whose delivery timeout fell in that time failed.
#[test]
fn unknown_producer_id_at_sequence_zero_takes_a_new_producer_id() {
    refused_under_a_forgotten_id_takes_a_new_producer_id(ErrorCode::UnknownProducerId);
}

/// Event Hubs after a restart answers every batch of a producer id it forgot
/// INVALID_PRODUCER_ID_MAPPING, at any epoch (Azure/azure-event-hubs-for-kafka#261, where the
/// Java producer never recovers): once a bumped epoch is refused so too, the producer takes a
/// new producer id. Before, it bumped once a second through the id's 32,767 epochs, and
/// every record failed at its delivery timeout (a review of Kafka-compatible brokers).
#[test]
fn invalid_producer_id_mapping_after_a_bump_takes_a_new_producer_id() {
    refused_under_a_forgotten_id_takes_a_new_producer_id(ErrorCode::InvalidProducerIdMapping);
}

fn refused_under_a_forgotten_id_takes_a_new_producer_id(code: ErrorCode) {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "a delivered under producer id 7");
    // The broker restarts and forgets producer 7; it hands out 8 next. Each connection is
    // answered on its own (the new producer id may be asked for on any of them).
    h.p.send(h.now, record("b")).unwrap();
    let (mut refused, mut inits) = (0, 0);
    let mut wires = Wires::new();
    for _ in 0..50 {
        pump(&mut h, &mut wires, &mut |h, _, f| {
            let (key, version, corr) = api_of(&f);
            Some(match key {
                api_key::PRODUCE => {
                    let records = produce_of(&f).topic_data[0].partition_data[0]
                        .records
                        .clone()
                        .unwrap();
                    let pid = i64::from_be_bytes(records[43..51].try_into().unwrap());
                    if pid == 7 {
                        refused += 1;
                        produce_error(&f, code)
                    } else {
                        respond(&f, &mut h.next_offset)
                    }
                }
                api_key::INIT_PRODUCER_ID => {
                    inits += 1;
                    let a = InitProducerIdResponse {
                        throttle_time_ms: 0,
                        error_code: 0,
                        producer_id: 8,
                        producer_epoch: 0,
                    };
                    encode_response::<InitProducerIdRequest>(&a, version, corr)
                }
                _ => respond(&f, &mut h.next_offset),
            })
        });
        if h.p.pending_records() == 0 {
            break;
        }
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
    }
    assert_eq!(
        h.p.pending_records(),
        0,
        "b delivered ({refused} refused, {inits} InitProducerId, events {:?})",
        h.events
    );
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert_eq!(inits, 1, "one new producer id");
    assert!(
        refused <= 2,
        "{refused} refusals under producer 7 (one bump at most)"
    );
    h.drain();
    let delivered = deliveries(&h.events);
    assert_eq!(delivered.len(), 2, "a and b delivered: {delivered:?}");
}

/// Review finding (2026-12-06, against librdkafka): an InitProducerId answered
/// UNKNOWN_SERVER_ERROR (Kafka's id allocation failing, its ZooKeeper or controller out of
/// reach) stopped the producer for good, every record it held failed `Fatal`. It is asked
/// again after the backoff, as librdkafka does: a record whose delivery timeout passes
/// meanwhile fails with that error, not persisted, and once an id is granted the next
/// record is delivered. No fatal error.
#[test]
fn an_init_producer_id_refused_unknown_server_error_is_asked_again() {
    init_producer_id_refused_is_asked_again(ErrorCode::UnknownServerError);
}

/// Redpanda in recovery mode (maintenance) answers InitProducerId POLICY_VIOLATION: asked
/// again after the backoff too (a review of Kafka-compatible brokers: it stopped the producer
/// for good, where its Produce answers in that mode fail only their batches).
#[test]
fn an_init_producer_id_refused_policy_violation_is_asked_again() {
    init_producer_id_refused_is_asked_again(ErrorCode::PolicyViolation);
}

fn init_producer_id_refused_is_asked_again(code: ErrorCode) {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
    let mut h = Harness::new(|c| {
        c.delivery_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(1);
    });
    h.p.send(h.now, record("a")).unwrap();
    let mut wires = Wires::new();
    let (inits, grant) = (std::cell::Cell::new(0), std::cell::Cell::new(false));
    let mut answer = |h: &mut Harness, _: ConnId, f: Bytes| {
        let (key, version, corr) = api_of(&f);
        Some(match key {
            api_key::INIT_PRODUCER_ID => {
                inits.set(inits.get() + 1);
                let granted = grant.get();
                let a = InitProducerIdResponse {
                    throttle_time_ms: 0,
                    error_code: if granted { 0 } else { code.as_i16() },
                    producer_id: if granted { 8 } else { -1 },
                    producer_epoch: if granted { 0 } else { -1 },
                };
                encode_response::<InitProducerIdRequest>(&a, version, corr)
            }
            _ => respond(&f, &mut h.next_offset),
        })
    };
    // Refused for 3 s: `a` reaches its delivery timeout waiting for an id.
    for _ in 0..300 {
        pump(&mut h, &mut wires, &mut answer);
        h.now += Duration::from_millis(10);
        h.p.handle_timeout(h.now);
    }
    pump(&mut h, &mut wires, &mut answer);
    assert!(
        !h.events.iter().any(|e| matches!(e, Event::Fatal(_))),
        "{:?}",
        h.events
    );
    assert_eq!(
        h.failures(),
        vec![(
            DeliveryError::DeliveryTimeout {
                last_error: Some(code)
            },
            Persistence::NotPersisted
        )]
    );
    grant.set(true);
    h.p.send(h.now, record("b")).unwrap();
    for _ in 0..300 {
        pump(&mut h, &mut wires, &mut answer);
        if h.p.pending_records() == 0 {
            break;
        }
        h.now += Duration::from_millis(10);
        h.p.handle_timeout(h.now);
    }
    pump(&mut h, &mut wires, &mut answer);
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "b delivered: {:?}",
        h.events
    );
    assert!(
        inits.get() >= 3,
        "asked again after each refusal: {}",
        inits.get()
    );
}

/// Review finding: CLUSTER_AUTHORIZATION_FAILED on InitProducerId fails the batches waiting
/// for an identity, and one already sequenced leaves a gap; the gap policy did not apply, so
/// under `CutPartition` a later batch in flight was re-sequenced and delivered past the
/// refused one. Now the cut takes it: `PartitionCut`, not persisted (the broker refused it
/// out of order).
#[test]
fn an_authorization_refusal_of_a_new_producer_id_cuts_the_partition_under_the_cut_policy() {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
    use kprod_core::GapPolicy;

    let mut h = Harness::new(|c| c.gap_policy = GapPolicy::CutPartition);
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0);
    // a and b in flight; a is refused PRODUCER_FENCED (the broker refuses the epoch: the
    // producer drops its identity and asks for a new id).
    let (_, requests) = h.each_in_its_own_request(&["a", "b"]);
    h.feed(produce_error(&requests[0], ErrorCode::ProducerFenced));
    let init = h.next_frame().expect("an InitProducerId request");
    let (key, version, corr) = api_of(&init);
    assert_eq!(key, api_key::INIT_PRODUCER_ID);
    let refused = InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::ClusterAuthorizationFailed.as_i16(),
        producer_id: -1,
        producer_epoch: -1,
    };
    // Asked on the idle bootstrap connection (b is in flight on the leader's).
    let answer = encode_response::<InitProducerIdRequest>(&refused, version, corr);
    h.p.handle_read(h.now, ConnId(0), &mut BytesMut::from(&answer[..]));
    h.drain();
    // b comes back refused out of order (a is not in the log).
    h.feed(produce_error(
        &requests[1],
        ErrorCode::OutOfOrderSequenceNumber,
    ));
    h.answer_all();
    let failures = h.failures();
    assert_eq!(
        failures,
        [
            (
                DeliveryError::Broker(ErrorCode::ClusterAuthorizationFailed),
                Persistence::NotPersisted
            ),
            (DeliveryError::PartitionCut, Persistence::NotPersisted),
        ],
        "{:?}",
        h.events
    );
    assert_eq!(h.p.pending_records(), 0);
}

/// Review finding: Kafka answers a retry it finds already written (a duplicate) with the
/// stored batch's largest timestamp as `log_append_time_ms`, also on a CreateTime topic; the
/// delivery then claimed a log append time. Now a time is believed on an attempt that cannot
/// be a duplicate (which shows whether the topic stamps appends) and on a retry that may be
/// one only once the topic is known to.
#[test]
fn a_retry_answered_with_a_time_is_not_taken_for_a_log_append_time_topic_unless_known() {
    use kprod_core::protocol::produce::ProduceRequest;

    let mut h = Harness::new(|_| {});
    // `refuse_first`: the first attempt draws this error, and the retry is answered.
    let stamped = |h: &mut Harness, value: &str, refuse_first: Option<ErrorCode>, stamp: i64| {
        h.events.clear();
        h.p.send(h.now, record(value)).unwrap();
        let mut f = h.answer_until_produce(&[]).expect("a Produce request");
        if let Some(code) = refuse_first {
            h.feed(produce_error(&f, code));
            h.now += Duration::from_secs(2);
            h.p.handle_timeout(h.now);
            f = h.answer_until_produce(&[]).expect("the retry");
        }
        let (_, version, corr) = api_of(&f);
        let a = respond(&f, &mut h.next_offset);
        let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
        resp.responses[0].partition_responses[0].log_append_time_ms = stamp;
        h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
        (h.events.iter())
            .filter_map(|e| match e {
                Event::Delivered(d) => Some(d.log_append_time),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // A retry of a possibly written attempt (REQUEST_TIMED_OUT after the append) answered
    // with a time on a topic not known to stamp appends: a duplicate's create time, perhaps.
    let timed_out = Some(ErrorCode::RequestTimedOut);
    assert_eq!(stamped(&mut h, "a", timed_out, 1_700_000_000_001), [None]);
    // A first attempt answered with one: the topic stamps appends.
    assert_eq!(
        stamped(&mut h, "b", None, 1_700_000_000_002),
        [Some(1_700_000_000_002)]
    );
    // From then on a possible duplicate's time is believed too.
    assert_eq!(
        stamped(&mut h, "c", timed_out, 1_700_000_000_003),
        [Some(1_700_000_000_003)]
    );
    // A first attempt answered without one: the topic was switched back to CreateTime, and
    // a possible duplicate's time is no longer believed.
    assert_eq!(stamped(&mut h, "d", None, -1), [None]);
    assert_eq!(stamped(&mut h, "e", timed_out, 1_700_000_000_005), [None]);
}

/// Review finding: a time was believed only on a first attempt, so on a LogAppendTime topic
/// a batch retried after a refusal that proves it unwritten (a new topic's
/// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS) was reported with its create time. Its
/// retry cannot be a duplicate: its time is the log's (as the Java client reports it).
#[test]
fn a_retry_of_an_unwritten_attempt_reports_the_log_append_time() {
    use kprod_core::protocol::produce::ProduceRequest;

    for code in [
        ErrorCode::NotEnoughReplicas,
        ErrorCode::UnknownTopicOrPartition,
    ] {
        let mut h = Harness::new(|_| {});
        h.p.send(h.now, record("a")).unwrap();
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, code));
        h.now += Duration::from_secs(2);
        h.p.handle_timeout(h.now);
        let f = h.answer_until_produce(&[]).expect("the retry");
        let (_, version, corr) = api_of(&f);
        let a = respond(&f, &mut h.next_offset);
        let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
        resp.responses[0].partition_responses[0].log_append_time_ms = 1_700_000_000_001;
        h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
        let times: Vec<_> = (h.events.iter())
            .filter_map(|e| match e {
                Event::Delivered(d) => Some(d.log_append_time),
                _ => None,
            })
            .collect();
        assert_eq!(times, [Some(1_700_000_000_001)], "after {code:?}");
    }
}

/// Probe finding: a broker that refuses every batch (Tansu with its storage failing answers
/// UNKNOWN_SERVER_ERROR) and takes no epoch bump made the producer ask for a new producer id
/// per refused batch, at once each time (about 160 a second against Tansu). Now a new id
/// whose predecessor had nothing acknowledged waits for the backoff, which grows while ids
/// keep being spent so; a batch acknowledged under an id resets it.
#[test]
fn a_broker_refusing_every_batch_is_not_asked_for_a_new_producer_id_per_batch() {
    // An epoch of at most 1: every other bump is a new producer id, as against Tansu,
    // which refuses the bump.
    let mut h = Harness::new(|c| {
        c.max_epoch = 1;
        c.retry_backoff = Duration::from_millis(100);
        c.retry_backoff_max = Duration::from_secs(1);
    });
    let start = h.now;
    let mut inits = Vec::new();
    let mut refused = 0;
    let mut refuse = true;
    let mut wires = Wires::new();
    // Runs the producer until nothing is pending, each connection answered on its own, every
    // Produce refused while `refuse`; time moves 10 ms when nothing is left to answer.
    let mut run = |h: &mut Harness, refuse: bool, inits: &mut Vec<Duration>, refused: &mut u32| {
        settle(h, &mut wires, 1000, &mut |h, _, f| {
            Some(match api_of(&f).0 {
                api_key::PRODUCE if refuse => {
                    *refused += 1;
                    produce_error(&f, ErrorCode::UnknownServerError)
                }
                key => {
                    if key == api_key::INIT_PRODUCER_ID {
                        inits.push(h.now - start);
                    }
                    respond(&f, &mut h.next_offset)
                }
            })
        });
    };
    // 40 records, one at a time, every Produce refused.
    for i in 0..40 {
        h.p.send(h.now, record(&format!("r{i}"))).unwrap();
        run(&mut h, refuse, &mut inits, &mut refused);
    }
    assert_eq!(refused, 40, "every record refused once");
    let failures = h.failures();
    assert_eq!(failures.len(), 40);
    let refusal = (
        DeliveryError::Broker(ErrorCode::UnknownServerError),
        Persistence::PossiblyPersisted,
    );
    assert!(failures.iter().all(|f| *f == refusal), "{failures:?}");
    // The first id and 19 new ones (each takes one refusal and one bump); after the first
    // few, the backoff has
    // grown to `retry.backoff.max.ms` between new ids. (Before: all 20 at the same instant.)
    assert_eq!(inits.len(), 20, "new ids at {inits:?}");
    let spacing: Vec<Duration> = inits.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        spacing.iter().skip(5).all(|d| *d >= Duration::from_secs(1)),
        "new ids at {inits:?}"
    );
    // An acknowledged batch resets the backoff: the id after it is asked for at once, the
    // next after the backoff again.
    refuse = false;
    h.p.send(h.now, record("ok")).unwrap();
    run(&mut h, refuse, &mut inits, &mut refused);
    assert_eq!(deliveries(&h.events).len(), 1, "ok delivered");
    let before = inits.len();
    refuse = true;
    let t = h.now - start;
    for i in 0..5 {
        h.p.send(h.now, record(&format!("s{i}"))).unwrap();
        run(&mut h, refuse, &mut inits, &mut refused);
    }
    let after: Vec<Duration> = inits[before..].iter().map(|d| *d - t).collect();
    assert_eq!(after.len(), 2, "two new ids: {after:?}");
    // The partition's first bump after the acknowledgement goes at once (a local one, to
    // epoch 1); the new id at its next, 100 ms on (bumps are paced whichever they are).
    assert!(
        after[0] <= Duration::from_millis(120),
        "the first new id at the second bump: {after:?}"
    );
    assert!(
        after[1] >= Duration::from_millis(200),
        "the second later: {after:?}"
    );
}

/// Review finding: the backoff between new producer ids was reset only by an acknowledgement
/// under the current id. When one Produce answer refused a batch of partition 0 (which gives
/// the id up) and acknowledged one of partition 1 under the same id, that acknowledgement did
/// not count, so partition 1's next records waited for a backoff growing to
/// `retry.backoff.max.ms` per refusal of partition 0. Now an acknowledgement under the id
/// just given up resets it too, and a new id already waiting for that backoff is asked for
/// at once: a healthy partition beside a refused one is not slowed.
#[test]
fn an_acknowledgement_beside_the_refusal_that_gave_an_id_up_resets_the_new_id_backoff() {
    use kprod_core::protocol::init_producer_id::InitProducerIdRequest;
    use kprod_core::protocol::produce::ProduceRequest;
    // An epoch of at most 1: every other refusal is a new producer id, as against Tansu,
    // which refuses the bump.
    let mut h = Harness::new(|c| {
        c.max_epoch = 1;
        c.retry_backoff = Duration::from_millis(100);
        c.retry_backoff_max = Duration::from_secs(1);
    });
    let start = h.now;
    let mut wires = Wires::new();
    let mut inits: Vec<Duration> = Vec::new();
    let mut next_pid = 100;
    // When partition 0 was refused under epoch 1 (the refusal that gives the id up).
    let last_epoch_refusals = std::cell::RefCell::new(Vec::new());
    // One round: a record for each of `parts`, run until nothing is pending; partition 0
    // is refused for good, partition 1 written, the refusal first in the answer. Time
    // moves 10 ms when nothing is left to answer.
    let mut round = |h: &mut Harness, parts: &[i32], inits: &mut Vec<Duration>| {
        for &pi in parts {
            h.p.send(h.now, Record::new(TOPIC, "r").with_partition(pi))
                .unwrap();
        }
        settle(h, &mut wires, 1000, &mut |h, _, f| {
            let (key, version, corr) = api_of(&f);
            let a = respond(&f, &mut h.next_offset);
            Some(match key {
                // Two partitions, both led by the one broker.
                api_key::METADATA => with_a_second_partition(&a, version, corr),
                // A distinct producer id each time.
                api_key::INIT_PRODUCER_ID => {
                    inits.push(h.now - start);
                    let (_, mut i) =
                        decode_response::<InitProducerIdRequest>(version, a.slice(4..)).unwrap();
                    next_pid += 1;
                    i.producer_id = next_pid;
                    encode_response::<InitProducerIdRequest>(&i, version, corr)
                }
                api_key::PRODUCE => {
                    let req = produce_of(&f);
                    for d in &req.topic_data[0].partition_data {
                        let records = d.records.as_ref().unwrap();
                        let epoch = i16::from_be_bytes(records[51..53].try_into().unwrap());
                        if d.index == 0 && epoch == 1 {
                            last_epoch_refusals.borrow_mut().push(h.now - start);
                        }
                    }
                    let (_, mut p) =
                        decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
                    let parts = &mut p.responses[0].partition_responses;
                    parts.sort_by_key(|p| p.index);
                    if parts[0].index == 0 {
                        parts[0].error_code = ErrorCode::UnknownServerError.as_i16();
                        parts[0].base_offset = -1;
                    }
                    encode_response::<ProduceRequest>(&p, version, corr)
                }
                _ => a,
            })
        });
    };
    // Five rounds of partition 0 alone: ids at 0, 100 and 700 ms, each refused under epochs
    // 0 and 1; the fifth refusal leaves the third id at epoch 1, two ids given up without an
    // acknowledgement. Every bump after the partition's first waits as its bumps in a row
    // without an acknowledgement do (100, 200, 400 ms, ...), a new id too since a
    // sixth session of 2026-12-07, and such a paced new id waits for nothing more since a
    // seventh (before: 0, 0 and 300 ms, new ids not paced by the partition's bumps; then 0,
    // 100 and 900 ms, the third waiting the new-id backoff on top of its bump's).
    for _ in 0..5 {
        round(&mut h, &[0], &mut inits);
    }
    assert_eq!(
        inits,
        [0, 100, 700].map(Duration::from_millis),
        "ids before the switch"
    );
    assert!(deliveries(&h.events).is_empty());
    // Then both partitions, seven rounds. The first answer refuses partition 0's batch under
    // epoch 1 (a new id, which would wait 400 ms) and acknowledges partition 1's under the
    // same id: the acknowledgement resets the backoff, so the id is asked for at once, and
    // so is each later one (partition 1 is acknowledged under every id).
    let switch = h.now - start;
    for _ in 0..7 {
        round(&mut h, &[0, 1], &mut inits);
    }
    let delivered = deliveries(&h.events);
    assert_eq!(delivered.len(), 7, "{:?}", h.events);
    assert!(delivered.iter().all(|d| d.1 == 1), "{delivered:?}");
    assert_eq!(h.failures().len(), 5 + 7);
    // Each new id after the switch comes 1 s after the refusal under epoch 1 that gave the
    // id before it up: partition 0's paced bump (its refusals for good come in a row, so
    // its bumps wait `retry.backoff.max.ms`), and nothing more: the acknowledgements reset
    // the new-id backoff, which would have grown past it. (Before the acknowledgements
    // counted: three in these rounds, at 400 ms, 1.2 s and 2.2 s after the switch. Before
    // a new id was paced as a bump is, since a sixth session of 2026-12-07: at each such
    // refusal, at once.)
    let gave_up: Vec<Duration> = (last_epoch_refusals.borrow().iter())
        .filter(|t| **t >= switch)
        .copied()
        .collect();
    let after = &inits[3..];
    assert_eq!(after.len(), 3, "{inits:?}");
    let expected: Vec<Duration> = (gave_up.iter().take(3))
        .map(|t| *t + Duration::from_secs(1))
        .collect();
    assert_eq!(
        after,
        &expected[..],
        "ids after the switch, and the refusals before"
    );
}

/// Soak finding (Tansu SIGKILLed and restarted on memory storage): the restarted broker
/// numbers its producer ids from 1 again, so the new producer id asked for after its
/// UNKNOWN_PRODUCER_ID answer came back equal (id and epoch) to the one the partitions were
/// still bound to. The producer took it for the same identity: no partition moved to it,
/// each waited for a rebase that never came, and nothing was sent until the delivery
/// timeout (120 s in the soak, twice in 20 restarts). An identity now also carries which
/// InitProducerId answer gave it, so a reissued one is new.
#[test]
fn a_producer_id_handed_out_again_after_a_broker_lost_its_state_is_a_new_identity() {
    use kprod_core::protocol::init_producer_id::InitProducerIdRequest;
    // Epoch 1 is the last (every bump is a new producer id, as against Tansu, which refuses
    // bumps), and the broker always answers producer id 1 at epoch 1.
    let mut h = Harness::new(|c| {
        c.max_epoch = 1;
        c.delivery_timeout = Duration::from_secs(30);
    });
    let mut wires = Wires::new();
    let mut lost_state = false;
    let mut inits = 0;
    let mut sent: Vec<(i16, i32)> = Vec::new();
    let mut run = |h: &mut Harness, lost_state: &mut bool, inits: &mut u32, sent: &mut Vec<_>| {
        settle(h, &mut wires, 10_000, &mut |h, _, f| {
            let (key, version, corr) = api_of(&f);
            Some(match key {
                api_key::INIT_PRODUCER_ID => {
                    *inits += 1;
                    let a = respond(&f, &mut h.next_offset);
                    let (_, mut i) =
                        decode_response::<InitProducerIdRequest>(version, a.slice(4..)).unwrap();
                    (i.producer_id, i.producer_epoch) = (1, 1);
                    encode_response::<InitProducerIdRequest>(&i, version, corr)
                }
                api_key::PRODUCE => {
                    sent.push(epoch_and_sequence(&f));
                    // The broker restarted without its state: it knows no producer until
                    // it hands out an id again.
                    if std::mem::take(lost_state) {
                        produce_error(&f, ErrorCode::UnknownProducerId)
                    } else {
                        respond(&f, &mut h.next_offset)
                    }
                }
                _ => respond(&f, &mut h.next_offset),
            })
        });
    };
    for i in 0..3 {
        h.p.send(h.now, record(&format!("before {i}"))).unwrap();
        run(&mut h, &mut lost_state, &mut inits, &mut sent);
    }
    assert_eq!(inits, 1);
    let restarted = h.now;
    lost_state = true;
    h.p.send(h.now, record("after")).unwrap();
    run(&mut h, &mut lost_state, &mut inits, &mut sent);
    // Refused under the first (1, 1) at sequence 3, then sent again under the second, from
    // sequence 0, and delivered at once.
    assert_eq!(inits, 2, "a new producer id after the refusal");
    assert_eq!(sent[3..], [(1, 3), (1, 0)], "{sent:?}");
    assert_eq!(deliveries(&h.events).len(), 4, "{:?}", h.events);
    assert!(h.failures().is_empty(), "{:?}", h.failures());
    assert!(
        h.now - restarted < Duration::from_secs(1),
        "delivered {:?} after the restart",
        h.now - restarted
    );
}

/// The connections of a hand-driven producer, each with the bytes written to it.
type Wires = std::collections::BTreeMap<ConnId, BytesMut>;

/// One round: carries out the producer's outputs (connects succeed at once, events are kept),
/// then offers each whole request written to `answer`, which answers it (`Some`) or holds it.
/// Returns whether anything was answered.
fn pump(
    h: &mut Harness,
    wires: &mut Wires,
    answer: &mut dyn FnMut(&mut Harness, ConnId, Bytes) -> Option<Bytes>,
) -> bool {
    loop {
        match h.p.poll_output() {
            Output::Wait { .. } => break,
            Output::Connect { conn, .. } => h.p.handle_connected(h.now, conn),
            Output::Transmit { conn, bytes } => {
                wires.entry(conn).or_default().extend_from_slice(&bytes)
            }
            Output::Close { conn, .. } => {
                wires.remove(&conn);
            }
            Output::Event(e) => h.events.push(e),
            Output::SaslInput { .. } => unreachable!("no SASL here"),
        }
    }
    let mut frames = Vec::new();
    for (&conn, wire) in wires.iter_mut() {
        while wire.len() >= 4 {
            let len = 4 + i32::from_be_bytes(wire[..4].try_into().unwrap()) as usize;
            frames.push((conn, wire.split_to(len).freeze()));
        }
    }
    let mut answered = false;
    for (conn, f) in frames {
        if let Some(a) = answer(h, conn, f) {
            h.p.handle_read(h.now, conn, &mut BytesMut::from(&a[..]));
            answered = true;
        }
    }
    answered
}

/// Pumps until no record is pending, each request offered to `answer`; when nothing was
/// answered, time moves 10 ms. Panics after `rounds` rounds.
fn settle(
    h: &mut Harness,
    wires: &mut Wires,
    rounds: usize,
    answer: &mut dyn FnMut(&mut Harness, ConnId, Bytes) -> Option<Bytes>,
) {
    for _ in 0..rounds {
        if !pump(h, wires, answer) {
            if h.p.pending_records() == 0 {
                return;
            }
            h.now += Duration::from_millis(10);
            h.p.handle_timeout(h.now);
        }
    }
    panic!("not resolved: {:?}", h.events);
}

/// Probe finding (P8 lateness): a batch in flight when its `delivery.timeout.ms` passed waited
/// for its answer or its request timeout, so its records were reported up to one request
/// timeout late (114.7 s against a 90 s delivery timeout in the probe; the Java client fails
/// them at 90 s). Now its records fail at the delivery timeout, possibly persisted, and the
/// batch stays in flight, uncharged, until its request resolves; the connection is kept.
/// A broker that holds every Produce: request timeout 2 s, delivery timeout 3 s; the first
/// attempt times out at 2 s, the retry is in flight at 3 s. Then the held retry is answered:
/// `written` a success (nothing more is reported, and the next record follows in the same
/// epoch), or NOT_ENOUGH_REPLICAS (nothing more is reported either, and the gap makes the
/// partition start a new epoch).
fn in_flight_delivery_timeout(written: bool) {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(2);
        c.delivery_timeout = Duration::from_secs(3);
        c.retry_backoff = Duration::from_millis(100);
    });
    let start = h.now;
    let mut wires = Wires::new();
    let mut held: Vec<(ConnId, Bytes, Duration)> = Vec::new();
    h.p.send(h.now, record("late")).unwrap();
    let mut failed_at = None;
    for _ in 0..1000 {
        let answered = pump(&mut h, &mut wires, &mut |h, conn, f| {
            if api_of(&f).0 == api_key::PRODUCE {
                held.push((conn, f, h.now - start));
                None
            } else {
                Some(respond(&f, &mut h.next_offset))
            }
        });
        if !h.failures().is_empty() {
            failed_at = Some(h.now - start);
            break;
        }
        if !answered {
            h.now += Duration::from_millis(50);
            h.p.handle_timeout(h.now);
        }
    }
    let failed_at = failed_at.expect("the record resolved");
    let sent: Vec<Duration> = held.iter().map(|h| h.2).collect();
    assert_eq!(sent.len(), 2, "a first attempt and a retry: {sent:?}");
    assert!(
        sent[1] > Duration::from_secs(2) && sent[1] < Duration::from_secs(3),
        "the retry went out after the first attempt's request timeout: {sent:?}"
    );
    assert_eq!(
        failed_at,
        Duration::from_secs(3),
        "failed at its delivery timeout (4.1 s before: the retry's request timeout)"
    );
    let late = (
        DeliveryError::DeliveryTimeout {
            last_error: Some(ErrorCode::RequestTimedOut),
        },
        Persistence::PossiblyPersisted,
    );
    assert_eq!(h.failures(), vec![late.clone()]);
    let Event::Failed { record: back, .. } = h
        .events
        .iter()
        .find(|e| matches!(e, Event::Failed { .. }))
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(
        back.as_ref().and_then(|r| r.value.clone()).as_deref(),
        Some(&b"late"[..]),
        "the record handed back"
    );
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(
        h.p.buffered_bytes(),
        0,
        "the batch in flight is no longer charged"
    );
    let disconnects = |h: &Harness| {
        (h.events.iter())
            .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::Disconnected { .. })))
            .count()
    };
    let before = disconnects(&h);
    // The held retry is answered now, on the connection it was sent on (still open).
    let (conn, retry, _) = held.pop().unwrap();
    assert!(wires.contains_key(&conn), "the retry's connection is kept");
    let answer = if written {
        respond(&retry, &mut h.next_offset)
    } else {
        produce_error(&retry, ErrorCode::NotEnoughReplicas)
    };
    h.p.handle_read(h.now, conn, &mut BytesMut::from(&answer[..]));
    // The next record: delivered, in the same epoch after a written batch, in a new one
    // after the gap.
    h.p.send(h.now, record("next")).unwrap();
    let mut next_sent = None;
    let mut produces_after = Vec::new();
    for _ in 0..200 {
        let answered = pump(&mut h, &mut wires, &mut |h, _, f| {
            if api_of(&f).0 == api_key::PRODUCE {
                next_sent.get_or_insert(epoch_and_sequence(&f));
                let has = |v: &[u8]| f.windows(v.len()).any(|w| w == v);
                produces_after.push((has(b"late"), has(b"next")));
            }
            Some(respond(&f, &mut h.next_offset))
        });
        if h.p.pending_records() == 0 {
            break;
        }
        if !answered {
            h.now += Duration::from_millis(50);
            h.p.handle_timeout(h.now);
        }
    }
    assert_eq!(h.p.pending_records(), 0, "next resolved: {:?}", h.events);
    // The events of the last answer.
    pump(&mut h, &mut wires, &mut |h, _, f| {
        Some(respond(&f, &mut h.next_offset))
    });
    assert_eq!(
        h.failures(),
        vec![late],
        "nothing more reported for the late record"
    );
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "next delivered: {:?}",
        h.events
    );
    assert_eq!(disconnects(&h), before, "no connection given up on");
    assert_eq!(
        produces_after,
        vec![(false, true)],
        "one Produce after the answer, with next only: the late batch is never sent again"
    );
    if written {
        assert_eq!(next_sent, Some((0, 1)), "the same epoch, the next sequence");
    } else {
        assert_eq!(next_sent, Some((1, 0)), "a new epoch after the gap");
    }
}

#[test]
fn a_batch_in_flight_fails_at_its_delivery_timeout_and_a_late_success_reports_nothing() {
    in_flight_delivery_timeout(true);
}

#[test]
fn a_batch_in_flight_fails_at_its_delivery_timeout_and_a_late_refusal_reports_nothing() {
    in_flight_delivery_timeout(false);
}

/// Review finding: `close` finishes once every record has its outcome, which can now be while
/// a batch whose records were reported at their delivery timeout is still in flight. That
/// batch goes with the close: nothing is left to send, and no connection is asked for after.
#[test]
fn close_with_a_reported_batch_in_flight_finishes_and_asks_for_nothing_more() {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(2);
        c.delivery_timeout = Duration::from_secs(3);
    });
    let mut wires = Wires::new();
    h.p.send(h.now, record("late")).unwrap();
    let mut hold = |h: &mut Harness, _: ConnId, f: Bytes| {
        (api_of(&f).0 != api_key::PRODUCE).then(|| respond(&f, &mut h.next_offset))
    };
    for _ in 0..200 {
        if !pump(&mut h, &mut wires, &mut hold) {
            if !h.failures().is_empty() {
                break;
            }
            h.now += Duration::from_millis(50);
            h.p.handle_timeout(h.now);
        }
    }
    assert_eq!(
        h.failures().len(),
        1,
        "late reported at its delivery timeout"
    );
    h.p.close(h.now);
    pump(&mut h, &mut wires, &mut hold);
    assert!(h.p.is_closed(), "closed once every record has its outcome");
    // Time passes: nothing more is asked for.
    for _ in 0..100 {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        let o = h.p.poll_output();
        assert!(matches!(o, Output::Wait { .. }), "after the close: {o:?}");
    }
}

/// Probe finding: a record is refused as too large by Java's rule, its batch holding it alone
/// within `max.request.size`, not by that batch plus the request's own framing (about 145
/// bytes stricter before). The largest record taken goes alone in its request and is
/// delivered.
#[test]
fn the_largest_record_is_the_one_whose_batch_fits_max_request_size() {
    const MAX: usize = 4096;
    let mut h = Harness::new(|c| c.max_request_size = MAX);
    h.answer_all();
    // Java takes a record when 61 (batch header) + 21 (most a record's framing can take) +
    // key and value with their lengths + the header count fit: a 4,010-byte value here.
    let java_largest = MAX - 61 - 21 - 1 - 2 - 1;
    let first_refused = (3900..MAX)
        .find(|&v| {
            let r = Record::new(TOPIC, vec![1u8; v]).with_partition(0);
            match h.p.clone().send(h.now, r) {
                Ok(_) => false,
                Err(kprod_core::SendError::TooLarge { record: back, .. }) => {
                    assert_eq!(back.value.as_deref().map(<[u8]>::len), Some(v));
                    true
                }
                Err(e) => panic!("{e:?}"),
            }
        })
        .expect("a record too large");
    assert!(
        first_refused > java_largest,
        "{first_refused}: Java takes {java_largest}"
    );
    assert!(
        first_refused <= MAX - 61,
        "{first_refused}: its batch cannot fit"
    );
    // A small record on another partition first: the large one waits for its own request.
    h.p.send(h.now, Record::new(TOPIC, "small").with_partition(1))
        .unwrap();
    let big = Record::new(TOPIC, vec![2u8; first_refused - 1]).with_partition(0);
    let id = h.p.send(h.now, big).unwrap();
    h.drain();
    let mut sizes = Vec::new();
    while let Some(f) = h.next_frame() {
        if api_of(&f).0 == api_key::PRODUCE {
            let req = produce_of(&f);
            let batches: usize = req.topic_data.iter().map(|t| t.partition_data.len()).sum();
            sizes.push((f.len(), batches));
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
        h.drain();
    }
    let alone = sizes
        .iter()
        .find(|s| s.0 > MAX)
        .expect("the large record's request");
    assert_eq!(alone.1, 1, "{sizes:?}: the large batch goes alone");
    assert!(
        deliveries(&h.events).iter().any(|d| d.0 == id),
        "delivered: {:?}",
        h.events
    );
}

/// librdkafka's record-count limits (`queue.buffering.max.messages`, `batch.num.messages`),
/// honoured beside the byte limits: a batch is sent once it holds `max_batch_records`
/// records, and past `max_buffered_records` unresolved records `send` is refused
/// `QueueFull` with the record, and takes records again once some resolve.
#[test]
fn record_count_limits_bound_batches_and_the_buffer() {
    let mut h = Harness::new(|c| {
        c.linger = Duration::from_secs(1);
        c.max_batch_records = Some(3);
        c.max_buffered_records = Some(7);
    });
    for i in 0..7 {
        h.p.send(h.now, record(&format!("r{i}"))).unwrap();
    }
    let refused = h.p.send(h.now, record("r7")).unwrap_err();
    assert!(matches!(&refused, kprod_core::SendError::QueueFull(r) if *r == record("r7")));
    assert!(
        refused.to_string().contains("queue.buffering.max.messages"),
        "{refused}"
    );
    // A record too large for any batch is refused as such, not as waiting for room.
    let big = Record::new(TOPIC, vec![0u8; 2 << 20]).with_partition(0);
    let refused = h.p.send(h.now, big).unwrap_err();
    assert!(
        matches!(refused, kprod_core::SendError::TooLarge { .. }),
        "{refused:?}"
    );
    // Full batches go at once (linger is 1 s); the refusal sends the rest early too (as a
    // refusal for memory does): batches of 3, 3 and 1.
    h.drain();
    let mut counts = Vec::new();
    while let Some(f) = h.next_frame() {
        if api_of(&f).0 == api_key::PRODUCE {
            let req = produce_of(&f);
            let batch = req.topic_data[0].partition_data[0].records.clone().unwrap();
            counts.push(i32::from_be_bytes(batch[57..61].try_into().unwrap()));
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    assert_eq!(counts, [3, 3, 1]);
    assert_eq!(deliveries(&h.events).len(), 7);
    // Resolved: records are taken again.
    h.p.send(h.now, record("r7")).unwrap();
}

/// Why each connection closed, from the `Disconnected` diagnostics among `events`.
fn disconnects(events: &[Event]) -> Vec<(ConnId, &'static str)> {
    (events.iter())
        .filter_map(|e| match e {
            Event::Diagnostic(Diagnostic::Disconnected { conn, reason, .. }) => {
                Some((*conn, *reason))
            }
            _ => None,
        })
        .collect()
}

/// `connections.max.idle.ms` (Java's default 9 minutes, under the broker's 10): a ready
/// connection with nothing in flight and no traffic for the limit is closed; the next record
/// opens one again at once (no reconnect backoff); a connection awaiting an answer is never
/// idle, however long the answer takes (its request timeout bounds that).
#[test]
fn a_connection_idle_for_connections_max_idle_is_closed_and_opened_again_when_needed() {
    let idle = Duration::from_secs(10);
    let mut h = Harness::new(|c| {
        c.connections_max_idle = Some(idle);
        c.metadata_max_age = Duration::from_secs(3600);
    });
    let mut wires = Wires::new();
    let mut healthy = |h: &mut Harness, _: ConnId, f: Bytes| Some(respond(&f, &mut h.next_offset));
    let t0 = h.now;
    h.p.send(h.now, record("a")).unwrap();
    settle(&mut h, &mut wires, 100, &mut healthy);
    assert_eq!(deliveries(&h.events).len(), 1);
    let open: Vec<ConnId> = h.p.connections().collect();
    assert!(!open.is_empty());
    let last_traffic = h.now;
    assert_eq!(
        h.p.poll_output(),
        Output::Wait {
            until: Some(last_traffic + idle)
        },
        "the idle limit is the next deadline"
    );

    h.now = last_traffic + idle - Duration::from_millis(1);
    h.p.handle_timeout(h.now);
    pump(&mut h, &mut wires, &mut healthy);
    assert_eq!(disconnects(&h.events), vec![], "not idle for long enough");
    assert_eq!(h.p.connections().collect::<Vec<_>>(), open);

    h.now = last_traffic + idle;
    h.p.handle_timeout(h.now);
    pump(&mut h, &mut wires, &mut healthy);
    let closed: Vec<(ConnId, &str)> = open.iter().map(|c| (*c, "idle")).collect();
    assert_eq!(disconnects(&h.events), closed);
    assert_eq!(h.p.connections().count(), 0);
    assert_eq!(
        h.p.poll_output(),
        Output::Wait {
            until: Some(t0 + Duration::from_secs(3600))
        },
        "only the periodic metadata refresh to wait for: no reconnect backoff after an idle \
         close"
    );

    // The next record reconnects at once and is delivered without time passing.
    let reopened_at = h.now;
    h.p.send(h.now, record("b")).unwrap();
    settle(&mut h, &mut wires, 100, &mut healthy);
    assert_eq!(h.now, reopened_at);
    assert_eq!(deliveries(&h.events).len(), 2);
    assert_eq!(deliveries(&h.events)[1].2, Some(1));
    assert_eq!(h.p.connections().count(), 1, "the leader's, opened again");

    // A Produce request left unanswered for longer than the idle limit keeps its connection.
    h.events.clear();
    let mut held = Vec::new();
    h.p.send(h.now, record("c")).unwrap();
    pump(&mut h, &mut wires, &mut |_, conn, f| {
        held.push((conn, f));
        None
    });
    assert_eq!(held.len(), 1, "one Produce request: {held:?}");
    let (conn, produce) = held.pop().unwrap();
    assert_eq!(api_of(&produce).0, api_key::PRODUCE);
    h.now += idle + Duration::from_secs(5);
    h.p.handle_timeout(h.now);
    pump(&mut h, &mut wires, &mut healthy);
    assert_eq!(disconnects(&h.events), vec![]);
    let answer = respond(&produce, &mut h.next_offset);
    h.p.handle_read(h.now, conn, &mut BytesMut::from(&answer[..]));
    pump(&mut h, &mut wires, &mut healthy);
    assert_eq!(
        deliveries(&h.events),
        vec![(deliveries(&h.events)[0].0, 0, Some(2))]
    );
    // And once answered, it is idle from the answer on.
    assert_eq!(
        h.p.poll_output(),
        Output::Wait {
            until: Some(h.now + idle)
        }
    );
}

#[test]
fn connections_max_idle_of_zero_is_refused() {
    let cfg = kprod_core::ProducerConfig {
        bootstrap_servers: vec!["b:9092".into()],
        connections_max_idle: Some(Duration::ZERO),
        ..Default::default()
    };
    let e = kprod_core::Producer::new(cfg, std::time::Instant::now()).unwrap_err();
    assert!(e.to_string().contains("connections.max.idle.ms"), "{e}");
}

/// Review finding: a connection throttled by the broker (KIP-219) was closed as idle before
/// the throttle ended, and the throttle (kept per connection) was forgotten: the next record
/// went out at once on a new connection, 4 s before the broker's 5 s throttle ended. Idleness
/// now counts from the end of a throttle.
#[test]
fn an_idle_close_does_not_forget_a_throttle() {
    use kprod_core::protocol::produce::ProduceRequest;
    let mut h = Harness::new(|c| c.connections_max_idle = Some(Duration::from_secs(1)));
    let mut wires = Wires::new();
    // Every answer is healthy; the first Produce answer throttles for 5 s. Produce requests
    // are logged with the time they were read.
    let mut produced = Vec::new();
    let mut answer = |h: &mut Harness, conn: ConnId, f: Bytes| {
        let a = respond(&f, &mut h.next_offset);
        let (key, version, corr) = api_of(&f);
        if key != api_key::PRODUCE {
            return Some(a);
        }
        produced.push((h.now, conn));
        if produced.len() > 1 {
            return Some(a);
        }
        let (_, mut resp) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
        resp.throttle_time_ms = 5_000;
        Some(encode_response::<ProduceRequest>(&resp, version, corr))
    };
    let t0 = h.now;
    h.p.send(h.now, record("a")).unwrap();
    while pump(&mut h, &mut wires, &mut answer) {}
    h.p.send(h.now, record("b")).unwrap();
    for ms in (250..=6_000).step_by(250) {
        h.now = t0 + Duration::from_millis(ms);
        h.p.handle_timeout(h.now);
        while pump(&mut h, &mut wires, &mut answer) {}
    }
    assert_eq!(deliveries(&h.events).len(), 2);
    assert_eq!(produced.len(), 2, "{produced:?}");
    let (b_at, b_conn) = produced[1];
    assert!(
        b_at >= t0 + Duration::from_secs(5),
        "b written {:?} after the throttle began",
        b_at - t0
    );
    assert_eq!(b_conn, produced[0].1, "on the throttled connection, kept");
}

/// Review finding (2026-12-05): a Produce answer with a code Produce never gives (a Fetch
/// code such as OFFSET_OUT_OF_RANGE or INVALID_FETCH_SIZE, from a broker or proxy that
/// misbehaves) failed its records as not persisted, while an unnamed code failed them as
/// possibly persisted. Either says nothing about the attempt: possibly persisted (§C S4(b)).
#[test]
fn a_code_produce_never_gives_fails_as_possibly_persisted() {
    for code in [
        ErrorCode::OffsetOutOfRange,
        ErrorCode::InvalidFetchSize,
        ErrorCode::Unknown(777),
    ] {
        let mut h = Harness::new(|_| {});
        h.p.send(h.now, record("x")).unwrap();
        h.answer_all();
        h.p.send(h.now, record("a")).unwrap();
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, code));
        assert_eq!(
            h.failures(),
            vec![(DeliveryError::Broker(code), Persistence::PossiblyPersisted)],
            "{code}"
        );
    }
}

/// Review finding (2026-12-05): a batch acknowledged by DUPLICATE_SEQUENCE_NUMBER (no offset)
/// set the partition's last acknowledged offset to -1, so a later head-of-line
/// OUT_OF_ORDER_SEQUENCE_NUMBER compared the log start with -1, always found it past, and
/// took a real loss for the broker's benign loss of state (no `DataLoss`, and
/// `DataLossPolicy::Fatal` ignored). The offset known before the duplicate is kept.
#[test]
fn a_duplicate_acknowledgement_keeps_the_last_known_offset_for_the_data_loss_test() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a Produce request");
    h.feed(produce_error(&f, ErrorCode::DuplicateSequenceNumber));
    assert_eq!(
        deliveries(&h.events).len(),
        2,
        "x at its offset, a as a duplicate"
    );
    // The broker lost our state, but its log still starts at 0, where `x` was acknowledged.
    h.p.send(h.now, record("b")).unwrap();
    let g = h.answer_until_produce(&[]).expect("a Produce request");
    h.feed(produce_error(&g, ErrorCode::OutOfOrderSequenceNumber));
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, Event::Diagnostic(Diagnostic::DataLoss { .. }))),
        "acknowledged data below the log start is gone: {:?}",
        h.events
    );
    assert_eq!(h.p.metrics().data_loss_signals, 1, "counted in the metrics");
}

/// The metadata answer `a` (version `version`, correlation id `corr`) with a second
/// partition of the topic, led by the same broker.
fn with_a_second_partition(a: &Bytes, version: i16, corr: i32) -> Bytes {
    let (_, mut m) = decode_response::<MetadataRequest>(version, a.slice(4..)).unwrap();
    let mut second = m.topics[0].partitions[0].clone();
    second.partition_index = 1;
    m.topics[0].partitions.push(second);
    encode_response::<MetadataRequest>(&m, version, corr)
}

/// The tests of a broker that refuses every batch: backoffs from 100 ms to 1 s, records
/// given up after 20 s, requests after 5 s.
fn refused_for_20s(c: &mut kprod_core::ProducerConfig) {
    c.retry_backoff = Duration::from_millis(100);
    c.retry_backoff_max = Duration::from_secs(1);
    c.delivery_timeout = Duration::from_secs(20);
    c.request_timeout = Duration::from_secs(5);
}

/// [`refused_for_20s`] against a broker without KIP-360 (InitProducerId below v3), where
/// every bump takes a new producer id.
fn refused_for_20s_without_kip360(c: &mut kprod_core::ProducerConfig) {
    refused_for_20s(c);
    c.max_versions.init_producer_id = Some(2);
}

/// One broker leading two partitions of the topic: partition 0 refuses every batch with
/// `code`, partition 1 takes every one. A record goes to each of `first` at the start and to
/// each of `every_tick` every 10 ms for 19 s, each answered before time moves on, for 21 s in
/// all. Returns when partition 0's batches were refused (from the start) and how many of
/// partition 1's were written.
fn two_partitions_one_refusing(
    h: &mut Harness,
    code: ErrorCode,
    first: &[i32],
    every_tick: &[i32],
) -> (Vec<Duration>, usize) {
    let (refused, healthy, _) = two_partitions_one_refusing_peak(h, code, first, every_tick);
    (refused, healthy)
}

/// [`two_partitions_one_refusing`], also returning the most records pending at once.
fn two_partitions_one_refusing_peak(
    h: &mut Harness,
    code: ErrorCode,
    first: &[i32],
    every_tick: &[i32],
) -> (Vec<Duration>, usize, usize) {
    use kprod_core::protocol::produce::ProduceRequest;
    let start = h.now;
    let mut refused = Vec::new();
    let mut healthy = 0;
    let mut peak = 0;
    let mut wires = Wires::new();
    let mut answer = |h: &mut Harness, _: ConnId, f: Bytes| {
        let (key, version, corr) = api_of(&f);
        let a = respond(&f, &mut h.next_offset);
        Some(match key {
            api_key::METADATA => with_a_second_partition(&a, version, corr),
            api_key::PRODUCE => {
                let (_, mut p) = decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
                for r in &mut p.responses[0].partition_responses {
                    if r.index == 0 {
                        refused.push(h.now - start);
                        r.error_code = code.as_i16();
                        r.base_offset = -1;
                    } else {
                        healthy += 1;
                    }
                }
                encode_response::<ProduceRequest>(&p, version, corr)
            }
            _ => a,
        })
    };
    for &p in first {
        h.p.send(h.now, Record::new(TOPIC, "x").with_partition(p))
            .unwrap();
    }
    for tick in 0..2100 {
        if tick < 1900 {
            for &p in every_tick {
                h.p.send(h.now, Record::new(TOPIC, "y").with_partition(p))
                    .unwrap();
            }
        }
        while pump(h, &mut wires, &mut answer) {}
        peak = peak.max(h.p.pending_records());
        h.now += Duration::from_millis(10);
        h.p.handle_timeout(h.now);
    }
    (refused, healthy, peak)
}

/// INVALID_PRODUCER_ID_MAPPING for every batch of one partition, beside a healthy one whose
/// batches are acknowledged under each new epoch: the refused partition still sees its
/// second refusal and takes a new producer id (the review of the day's diff: a producer-wide
/// mark, cleared by the healthy partition's acknowledgements, never saw it).
#[test]
fn a_partition_refused_id_mapping_beside_a_healthy_one_takes_a_new_producer_id() {
    let mut h = Harness::new(refused_for_20s);
    let (refused, healthy) =
        two_partitions_one_refusing(&mut h, ErrorCode::InvalidProducerIdMapping, &[0], &[1]);
    assert!(healthy >= 1800, "partition 1 kept being written: {healthy}");
    assert!(!refused.is_empty());
    let ids = (h.events.iter())
        .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::ProducerId(_))))
        .count();
    assert!(ids >= 2, "{ids} producer ids");
}

/// Review finding (2026-12-05): PRODUCER_FENCED dropped the producer id and a new one was
/// asked for at once, every time: a broker that fences every batch had InitProducerId,
/// Produce and PRODUCER_FENCED go round at the speed of the network until the delivery
/// timeout (the backoff a refusal by UNKNOWN_SERVER_ERROR gets, above, did not apply). Now
/// the first new id goes at once and the next ones after a growing backoff, up to
/// `retry.backoff.max.ms`, while nothing is acknowledged.
#[test]
fn a_broker_fencing_every_batch_is_not_asked_for_a_new_producer_id_at_network_speed() {
    let mut h = Harness::new(refused_for_20s);
    let start = h.now;
    let mut inits = Vec::new();
    let mut wires = Wires::new();
    h.p.send(h.now, record("x")).unwrap();
    settle(&mut h, &mut wires, 100_000, &mut |h, _, f| {
        Some(match api_of(&f).0 {
            api_key::PRODUCE => produce_error(&f, ErrorCode::ProducerFenced),
            key => {
                if key == api_key::INIT_PRODUCER_ID {
                    inits.push(h.now - start);
                }
                respond(&f, &mut h.next_offset)
            }
        })
    });
    let failures = h.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    // 20 s of fencing: the first id, one at once after the first fence, then a growing
    // backoff up to 1 s: about 20 ids, not thousands.
    assert!(
        (3..=30).contains(&inits.len()),
        "{} new ids: {inits:?}",
        inits.len()
    );
    let spacing: Vec<Duration> = inits.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        spacing.iter().skip(5).all(|d| *d >= Duration::from_secs(1)),
        "new ids at {inits:?}"
    );
}

/// Model review finding (2026-12-05): Kafka 0.11 (Produce v3 at most) deduplicates against a
/// producer's last batch on a partition only (spec §A.3), so with two batches of a partition
/// in flight a lost answer's retry drew OUT_OF_ORDER_SEQUENCE_NUMBER instead of its
/// duplicate's success, and a written batch failed possibly persisted. On such a connection a
/// partition now has one batch in flight at a time (KIP-98's rule for 0.11).
#[test]
fn a_kafka_0_11_broker_gets_one_batch_of_a_partition_at_a_time() {
    for (cap, expect) in [(Some(3), 1), (Some(5), 2), (None, 2)] {
        let mut h = Harness::new(|c| c.max_versions.produce = cap);
        h.p.send(h.now, record("a")).unwrap();
        h.answer_all();
        assert_eq!(deliveries(&h.events).len(), 1, "{cap:?}");
        h.p.send(h.now, record("b")).unwrap();
        h.drain();
        h.p.send(h.now, record("c")).unwrap();
        h.drain();
        let mut produce = 0;
        while let Some(f) = h.next_frame() {
            produce += usize::from(api_of(&f).0 == api_key::PRODUCE);
        }
        assert_eq!(produce, expect, "Produce requests in flight, cap {cap:?}");
    }
}

/// Review finding (2026-12-05): `reconnect.backoff.ms` above `retry.backoff.max.ms` (which caps
/// kprod's reconnect backoff) was cut down to that maximum without a word: 5 s asked for, 1 s
/// waited. It is the wait every time now, as asked (the Java client would wait its own
/// maximum, `reconnect.backoff.max.ms`).
#[test]
fn a_reconnect_backoff_above_the_maximum_is_waited_in_full() {
    for (backoff, at_least, below) in [(5_000, 5_000, 5_200), (50, 50, 200)] {
        let start = std::time::Instant::now();
        let cfg = kprod_core::ProducerConfig {
            bootstrap_servers: vec!["b:9092".into()],
            reconnect_backoff: Duration::from_millis(backoff),
            // 50 ms is waited to the millisecond (5 s is constant, never spread).
            backoff_jitter_percent: 0,
            ..kprod_core::ProducerConfig::default()
        };
        let mut p = kprod_core::Producer::new(cfg, start).unwrap();
        p.send(start, record("a")).unwrap();
        let connect = |p: &mut kprod_core::Producer| loop {
            match p.poll_output() {
                Output::Connect { conn, .. } => return Some(conn),
                Output::Wait { .. } => return None,
                _ => {}
            }
        };
        let first = connect(&mut p).expect("a first connect");
        p.handle_connect_failed(start, first);
        let mut t = start;
        let again = loop {
            if connect(&mut p).is_some() {
                break t - start;
            }
            assert!(t - start < Duration::from_secs(20), "never connected again");
            t += Duration::from_millis(10);
            p.handle_timeout(t);
        };
        assert!(
            again >= Duration::from_millis(at_least) && again < Duration::from_millis(below),
            "reconnect.backoff.ms={backoff}: connected again after {again:?}"
        );
    }
}

/// Review finding (2026-12-05): a broker answering INVALID_PRODUCER_EPOCH or
/// INVALID_PRODUCER_ID_MAPPING to every batch had the producer bump its epoch locally and
/// send again at once, every time: Produce and the refusal went round at the speed of the
/// network (32,767 bumps, then a new producer id, and again) until the delivery timeout.
/// Now the first bump goes at once and the next ones, while nothing is acknowledged under
/// the bumped identity, after a growing backoff up to `retry.backoff.max.ms` (for
/// INVALID_PRODUCER_ID_MAPPING, a new producer id after the first bump, each after the
/// backoff for ids).
#[test]
fn a_broker_refusing_every_epoch_is_not_sent_to_at_network_speed() {
    for code in [
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidProducerIdMapping,
    ] {
        let mut h = Harness::new(refused_for_20s);
        let start = h.now;
        let mut produces = Vec::new();
        let mut wires = Wires::new();
        h.p.send(h.now, record("x")).unwrap();
        settle(&mut h, &mut wires, 100_000, &mut |h, _, f| {
            Some(match api_of(&f).0 {
                api_key::PRODUCE => {
                    produces.push(h.now - start);
                    produce_error(&f, code)
                }
                _ => respond(&f, &mut h.next_offset),
            })
        });
        let failures = h.failures();
        assert_eq!(failures.len(), 1, "{code}: {failures:?}");
        // 20 s of refusals: the first attempt, one at once after the first bump, then a
        // growing backoff up to 1 s: about 20 attempts, not tens of thousands.
        assert!(
            (3..=30).contains(&produces.len()),
            "{code}: {} attempts: {:?}",
            produces.len(),
            &produces[..produces.len().min(40)]
        );
        let spacing: Vec<Duration> = produces.windows(2).map(|w| w[1] - w[0]).collect();
        // INVALID_PRODUCER_ID_MAPPING refused again after a bump takes a new producer id,
        // so its attempts alternate between the backoff for ids (growing from 100 ms) and
        // the new id's first bump: paced, if not a second apart.
        let least = if code == ErrorCode::InvalidProducerIdMapping {
            let ids = (h.events.iter())
                .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::ProducerId(_))))
                .count();
            assert!(ids >= 3, "{code}: {ids} producer ids");
            Duration::from_millis(200)
        } else {
            Duration::from_secs(1)
        };
        assert!(
            spacing.iter().skip(5).all(|d| *d >= least),
            "{code}: attempts at {produces:?}"
        );
    }
}

/// Review finding on the fix above: the count of fruitless bumps was the producer's, reset by
/// any acknowledgement under the current identity. With one partition refused every epoch
/// and another healthy, each bump let the healthy partition through under the new epoch,
/// its acknowledgement reset the count, and the refused partition bumped again at once: a
/// bump, and a rebase of every partition, per round trip until the epoch ran out. The count
/// is the partition's now, reset by its own acknowledgements.
#[test]
fn a_partition_refused_every_epoch_is_paced_beside_a_healthy_one() {
    let mut h = Harness::new(refused_for_20s);
    // A record for partition 1 every 10 ms for 19 s.
    let (refused, healthy) =
        two_partitions_one_refusing(&mut h, ErrorCode::InvalidProducerEpoch, &[0], &[1]);
    assert_eq!(h.p.pending_records(), 0);
    let failures = h.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(healthy >= 1900, "partition 1 kept being written: {healthy}");
    // 20 s: the first attempt, one at once after the first bump, then a backoff growing from
    // 100 ms to 1 s: about 25 attempts, not one per round trip.
    assert!(
        (3..=30).contains(&refused.len()),
        "{} attempts of partition 0: {:?}",
        refused.len(),
        &refused[..refused.len().min(40)]
    );
}

/// Review finding (2026-12-05): a partition whose every batch is refused for good
/// (INVALID_RECORD: records without a key on a compacted topic, say) left a gap in its
/// sequence each time, and each gap bumped the producer's epoch at once: one bump per round
/// trip, for as long as the application kept sending there, each making every healthy
/// partition drain and start again at sequence 0 with one batch in flight (and after 32,767,
/// a new producer id). Such bumps are paced now as the bumps that resend a refused batch
/// are: the partition's first at once, the next after a backoff growing to
/// `retry.backoff.max.ms` while none of its batches is acknowledged.
#[test]
fn a_partition_refusing_every_batch_for_good_does_not_bump_per_round_trip() {
    let mut h = Harness::new(refused_for_20s);
    // A record for each partition every 10 ms for 19 s.
    let (_, healthy) = two_partitions_one_refusing(&mut h, ErrorCode::InvalidRecord, &[], &[0, 1]);
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(h.failures().len(), 1900, "partition 0's records failed");
    assert!(healthy >= 1, "partition 1 written");
    assert_eq!(
        deliveries(&h.events).len(),
        1900,
        "partition 1's records delivered"
    );
    let bumps = (h.events.iter())
        .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::EpochBumped(_))))
        .count();
    // 20 s: the first at once, then a backoff growing from 100 ms to 1 s: about 25.
    assert!((2..=30).contains(&bumps), "{bumps} epoch bumps");
}

/// Review finding (2026-12-07, a cluster under operations): where every bump takes a new
/// producer id (a broker without KIP-360 met once, as in a rolling upgrade from 2.4, or
/// Tansu), the pacing above did not apply: a partition refused every batch (Write revoked on
/// its topic, say) beside a healthy one, whose acknowledgements reset the new-id backoff,
/// took a new producer id per refusal, every partition draining for each. Now paced as the
/// local bumps are.
#[test]
fn a_partition_refusing_every_batch_does_not_take_a_producer_id_per_round_trip() {
    let mut h = Harness::new(refused_for_20s_without_kip360);
    let (_, healthy) =
        two_partitions_one_refusing(&mut h, ErrorCode::TopicAuthorizationFailed, &[], &[0, 1]);
    assert_eq!(h.p.pending_records(), 0);
    assert!(healthy >= 1, "partition 1 written");
    assert_eq!(
        deliveries(&h.events).len(),
        1900,
        "partition 1's records delivered"
    );
    let ids = (h.events.iter())
        .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::ProducerId(_))))
        .count();
    let bumps = (h.events.iter())
        .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::EpochBumped(_))))
        .count();
    assert_eq!(bumps, 0, "no local bump without KIP-360");
    // 20 s: the first at once, then a backoff growing from 100 ms to 1 s: about 25.
    assert!((2..=30).contains(&ids), "{ids} producer ids");
}

/// Review finding (recovery without restart, a seventh session of 2026-12-07): a partition
/// whose every batch is refused TOPIC_AUTHORIZATION_FAILED (Write revoked, Describe kept, so
/// metadata is clean) sent one batch per paced bump, about one a second, while the
/// application kept sending there: its backlog grew until `buffer.memory` was full and every
/// topic's sends waited `max.block.ms`, and most of it failed at the delivery timeout with no
/// cause named. A refusal that holds for any record of the topic now fails what the
/// partition holds unsent with it, not persisted: its backlog stays about one bump backoff
/// of records.
#[test]
fn a_topic_refused_write_does_not_hold_a_backlog() {
    for (code, bounded) in [
        (ErrorCode::TopicAuthorizationFailed, true),
        (ErrorCode::InvalidTopicException, true),
        // A refusal of these records only: the others are still tried.
        (ErrorCode::InvalidRecord, false),
    ] {
        // A batch a record: one batch a bump carries one record.
        let mut h = Harness::new(|c| {
            refused_for_20s(c);
            c.batch_size = 1;
        });
        let (_, healthy, peak) = two_partitions_one_refusing_peak(&mut h, code, &[], &[0, 1]);
        assert_eq!(healthy, 1900, "partition 1 written");
        let failures = h.failures();
        assert!(failures.iter().all(|f| f.1 == Persistence::NotPersisted));
        if bounded {
            assert_eq!(h.p.pending_records(), 0);
            assert_eq!(failures.len(), 1900, "{code:?}");
            assert!(
                failures.iter().all(|f| f.0 == DeliveryError::Broker(code)),
                "{code:?}: {:?}",
                &failures[..3]
            );
            // A bump backoff of 1 s at most, a record a tick for each partition: about 100
            // of partition 0 at once, and partition 1's in flight.
            assert!(peak <= 250, "{code:?}: {peak} records pending at once");
        } else {
            assert!(peak > 1000, "{code:?}: {peak}");
        }
    }
}

/// The review of the rule above: a single TOPIC_AUTHORIZATION_FAILED (a broker that had not
/// yet seen an ACL granted moments before) failed everything the partition held. Only a
/// refusal that repeats under a new epoch, nothing acknowledged between, does: after one,
/// the backlog goes on under the next epoch and is delivered.
#[test]
fn a_single_topic_refusal_fails_its_batch_alone() {
    let mut h = Harness::new(|c| {
        c.batch_size = 1;
        c.max_in_flight = 1;
    });
    for i in 0..20 {
        h.p.send(h.now, record(&format!("r{i}"))).unwrap();
    }
    let mut wires = Wires::new();
    let mut refused = 0;
    settle(&mut h, &mut wires, 1000, &mut |h, _, f| {
        Some(if api_of(&f).0 == api_key::PRODUCE && refused == 0 {
            refused += 1;
            produce_error(&f, ErrorCode::TopicAuthorizationFailed)
        } else {
            respond(&f, &mut h.next_offset)
        })
    });
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(
        h.failures(),
        vec![(
            DeliveryError::Broker(ErrorCode::TopicAuthorizationFailed),
            Persistence::NotPersisted
        )],
        "the refused batch's one record"
    );
    assert_eq!(deliveries(&h.events).len(), 19);
}

/// Review leftover (a sixth session of 2026-12-07): where every bump takes a new producer
/// id, a partition refused over and over with no other to reset the counts waited its bump
/// backoff (`bump_at`) and then the new-id backoff before each new id: about 2 s apart at
/// maxima of 1 s. A bump already paced asks for its id at once now: the refusals settle a
/// backoff maximum apart.
#[test]
fn a_paced_new_producer_id_waits_one_backoff_not_two() {
    let mut h = Harness::new(refused_for_20s_without_kip360);
    let (refused, _) =
        two_partitions_one_refusing(&mut h, ErrorCode::TopicAuthorizationFailed, &[], &[0]);
    assert_eq!(h.p.pending_records(), 0);
    let gaps: Vec<Duration> = refused.windows(2).map(|w| w[1] - w[0]).collect();
    println!("{gaps:?}");
    // After the backoff has grown (100, 200, 400, 800 ms, then 1 s): a second apart, and
    // one round trip per id (a refusal, an InitProducerId, the next batch).
    assert!(
        gaps.len() >= 12,
        "{} refusals in 19 s: {gaps:?}",
        refused.len()
    );
    for g in &gaps[6..] {
        assert!(
            *g <= Duration::from_millis(1100),
            "refusals {g:?} apart: {gaps:?}"
        );
    }
}

/// Review of the change above: a paced bump asked for its new id at once, its wait set by
/// its partition's own count. A partition newly refused beside one refused for long (whose
/// ids have grown the new-id backoff to its maximum) took ids at its own short steps: 100,
/// 200, 400 ms. Such a bump waits the longer of the two backoffs now.
#[test]
fn a_partition_newly_refused_does_not_take_ids_faster_than_the_ids_backoff() {
    let mut h = Harness::new(refused_for_20s_without_kip360);
    let start = h.now;
    let mut inits: Vec<Duration> = Vec::new();
    let mut wires = Wires::new();
    let mut answer = |h: &mut Harness, _: ConnId, f: Bytes| {
        let (key, version, corr) = api_of(&f);
        if key == api_key::INIT_PRODUCER_ID {
            inits.push(h.now - start);
        }
        if key == api_key::PRODUCE {
            return Some(produce_error(&f, ErrorCode::InvalidRecord));
        }
        let a = respond(&f, &mut h.next_offset);
        Some(match key {
            api_key::METADATA => with_a_second_partition(&a, version, corr),
            _ => a,
        })
    };
    // Partition 0 alone for 8 s, then both, a record each every 10 ms.
    for tick in 0..1500 {
        let parts: &[i32] = if tick < 800 { &[0] } else { &[0, 1] };
        for &p in parts {
            h.p.send(h.now, Record::new(TOPIC, "y").with_partition(p))
                .unwrap();
        }
        while pump(&mut h, &mut wires, &mut answer) {}
        h.now += Duration::from_millis(10);
        h.p.handle_timeout(h.now);
    }
    let gaps: Vec<Duration> = inits.windows(2).map(|w| w[1] - w[0]).collect();
    println!("{inits:?}");
    // The first ids come as the backoff grows; from 4 s on, a second apart at least.
    let late: Vec<Duration> = (inits.windows(2))
        .filter(|w| w[0] >= Duration::from_secs(4))
        .map(|w| w[1] - w[0])
        .collect();
    assert!(late.len() >= 8, "{gaps:?}");
    assert!(
        late.iter().all(|g| *g >= Duration::from_millis(950)),
        "{gaps:?}"
    );
}

/// Review suspicion on the per-partition count: each batch of the partition refused under
/// the epoch whose bump waits would count again, so that with five in flight the backoff
/// jumped to its maximum at the second bump. It does not happen (after a bump a partition
/// sends one batch until one is acknowledged, and the first refusal bumps at once), and a
/// partition now asks explicitly once per identity; this pins one backoff step per bump with
/// five batches (epochs at 0, 0, 100, 300, 700 ms, ...).
#[test]
fn five_batches_refused_under_one_epoch_count_as_one_bump() {
    let mut h = Harness::new(|c| {
        refused_for_20s(c);
        c.retry_backoff_max = Duration::from_secs(10);
        c.batch_size = 1;
    });
    let start = h.now;
    let mut epochs: Vec<(i16, Duration)> = Vec::new();
    let mut wires = Wires::new();
    // Batches of one record each (`batch.size` below a record), five in flight.
    for v in ["a", "b", "c", "d", "e"] {
        h.p.send(h.now, record(v)).unwrap();
    }
    settle(&mut h, &mut wires, 100_000, &mut |h, _, f| {
        Some(match api_of(&f).0 {
            api_key::PRODUCE => {
                let epoch = epoch_and_sequence(&f).0;
                if epochs.last().is_none_or(|e| e.0 != epoch) {
                    epochs.push((epoch, h.now - start));
                }
                produce_error(&f, ErrorCode::InvalidProducerEpoch)
            }
            _ => respond(&f, &mut h.next_offset),
        })
    });
    // Epoch 0, epoch 1 at once, epoch 2 after 100 ms, epoch 3 after 200 ms more: one step of
    // the backoff per bump, not five.
    assert!(epochs.len() >= 4, "{epochs:?}");
    let gap = |k: usize| epochs[k].1 - epochs[k - 1].1;
    assert!(gap(2) < Duration::from_millis(500), "{epochs:?}");
    assert!(gap(3) < Duration::from_millis(1000), "{epochs:?}");
}

/// Review finding (2026-12-05): under a request quota (`request_percentage`) a KIP-219
/// broker throttles every API, and mutes the connection after a throttled Metadata (v6+) or
/// InitProducerId (v1+) answer as after a Produce one. Only Produce throttles were kept, so
/// the next Produce went onto the muted connection with its request timeout running from
/// the write: past `request.timeout.ms` of throttle the connection closed with every batch on
/// it possibly persisted.
#[test]
fn a_throttled_metadata_answer_holds_the_next_produce() {
    let mut h = Harness::new(|c| c.metadata_max_age = Duration::from_secs(1));
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "a delivered");
    // The bootstrap connection goes, so that the periodic refresh goes to the leader's,
    // and is answered with a throttle.
    assert_eq!(h.p.connections().count(), 2);
    h.drop_bootstrap_connection();
    assert_eq!(h.p.connections().collect::<Vec<_>>(), [h.conn.unwrap()]);
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.drain();
    let f = h.next_frame().expect("a metadata request");
    let (key, version, corr) = api_of(&f);
    assert_eq!(key, api_key::METADATA);
    assert!(version >= 6, "{version}");
    let answer = respond(&f, &mut h.next_offset);
    let (_, mut m) = decode_response::<MetadataRequest>(version, answer.slice(4..)).unwrap();
    m.throttle_time_ms = 700;
    h.feed(encode_response::<MetadataRequest>(&m, version, corr));
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    assert!(h.next_frame().is_none(), "nothing written while throttled");
    h.now += Duration::from_millis(699);
    h.p.handle_timeout(h.now);
    h.drain();
    let early = h.next_frame();
    assert!(
        early.is_none(),
        "nothing written while throttled: {:?}",
        early.as_deref().map(api_of)
    );
    h.now += Duration::from_millis(1);
    h.p.handle_timeout(h.now);
    h.drain();
    let f = h.next_frame().expect("b written once the throttle passed");
    assert_eq!(api_of(&f).0, api_key::PRODUCE);
}

/// Under `DataLossPolicy::Fatal`, `x` acknowledged at offset 0 on the leader's connection
/// (the bootstrap one dropped), then `b` sent: the harness and `b`'s Produce request.
fn b_sent_after_x_acknowledged() -> (Harness, Bytes) {
    let mut h = Harness::new(|c| c.data_loss_policy = kprod_core::DataLossPolicy::Fatal);
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    h.drop_bootstrap_connection();
    h.p.send(h.now, record("b")).unwrap();
    let f = h.answer_until_produce(&[]).expect("b's request");
    (h, f)
}

/// Neither a data-loss diagnostic nor a fatal error among the events.
fn assert_no_data_loss_signal(h: &Harness) {
    assert!(
        !(h.events.iter()).any(|e| matches!(
            e,
            Event::Diagnostic(Diagnostic::DataLoss { .. }) | Event::Fatal(_)
        )),
        "{:?}",
        h.events
    );
}

/// Review finding (2026-12-05): a head-of-line OUT_OF_ORDER_SEQUENCE_NUMBER answered (v5+)
/// with a log start of -1, which Kafka gives for a partition the broker just stopped leading,
/// was judged against the last acknowledged offset and taken as data loss: a spurious
/// signal, and under `DataLossPolicy::Fatal` a producer stopped for nothing. The broker does
/// not know the log start then, and the refusal says nothing about our state: the batch is
/// asked again of the leader metadata names, without a bump.
#[test]
fn an_out_of_order_answer_without_a_log_start_is_asked_again_not_taken_as_data_loss() {
    let (mut h, f) = b_sent_after_x_acknowledged();
    let seq = epoch_and_sequence(&f);
    assert!(api_of(&f).1 >= 5, "{:?}", api_of(&f));
    h.events.clear();
    h.feed(produce_error_with_log_start(
        &f,
        ErrorCode::OutOfOrderSequenceNumber,
        -1,
    ));
    assert_no_data_loss_signal(&h);
    // Metadata is asked for, and b goes again under the same epoch and sequence.
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    let mut asked_metadata = false;
    let g = loop {
        h.drain();
        let g = h.next_frame().expect("a request");
        match api_of(&g).0 {
            api_key::PRODUCE => break g,
            key => {
                asked_metadata |= key == api_key::METADATA;
                let a = respond(&g, &mut h.next_offset);
                h.feed(a);
            }
        }
    };
    assert!(asked_metadata);
    assert_eq!(epoch_and_sequence(&g), seq, "no bump");
    let a = respond(&g, &mut h.next_offset);
    h.feed(a);
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "b delivered: {:?}",
        h.events
    );
}

/// Review finding (2026-12-06, against franz-go): a broker that never reports its log start
/// (Redpanda answers -1 in every Produce answer) refused the retry of a head-of-line
/// OUT_OF_ORDER_SEQUENCE_NUMBER alike, and the batch was asked again under the same epoch
/// and sequence until its delivery timeout, its partition stalled. The second refusal
/// without a log start starts a new epoch and the batch goes again, without a data-loss
/// signal (an unknown log start tells none).
#[test]
fn a_second_out_of_order_answer_without_a_log_start_starts_a_new_epoch() {
    let (mut h, f) = b_sent_after_x_acknowledged();
    let first = epoch_and_sequence(&f);
    h.events.clear();
    let mut attempts = 0;
    let mut f = f;
    // Every attempt under the first epoch is refused so, as Redpanda does.
    let again = loop {
        attempts += 1;
        assert!(
            attempts <= 3,
            "b asked again under the same epoch: {attempts} attempts"
        );
        h.feed(produce_error_with_log_start(
            &f,
            ErrorCode::OutOfOrderSequenceNumber,
            -1,
        ));
        h.now += Duration::from_secs(2);
        h.p.handle_timeout(h.now);
        let g = h.answer_until_produce(&[]).expect("b again");
        if epoch_and_sequence(&g) != first {
            break g;
        }
        f = g;
    };
    assert_eq!(attempts, 2, "asked again once under the same epoch");
    let (epoch, seq) = epoch_and_sequence(&again);
    assert!(
        epoch > first.0 && seq == 0,
        "{first:?} -> {:?}",
        (epoch, seq)
    );
    assert_no_data_loss_signal(&h);
    let a = respond(&again, &mut h.next_offset);
    h.feed(a);
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "b delivered: {:?}",
        h.events
    );
}

/// Review finding (2026-12-05): UNKNOWN_PRODUCER_ID on the retry of a batch whose first
/// attempt went unanswered was taken to mean the first attempt did not land, and the batch
/// was written again under the next identity. Brokers before 2.4 forget a producer whose
/// last batch falls below the log start (Kafka Streams purging a repartition topic it has
/// read, KAFKA-7190), so the first attempt may be in the log: written again, it would be
/// there twice. It fails possibly persisted instead, and is not sent again.
/// `x` acknowledged at offset 0, then `a` sent, its answer lost with the connection, and
/// its retry answered UNKNOWN_PRODUCER_ID with the log starting at `log_start`.
fn unknown_producer_id_on_a_retry(log_start: i64) -> Harness {
    unknown_producer_id_on_a_retry_after(log_start, Duration::ZERO)
}

/// [`unknown_producer_id_on_a_retry`], `a` sent `idle` after `x` was acknowledged (the
/// partition probes after 10 s).
fn unknown_producer_id_on_a_retry_after(log_start: i64, idle: Duration) -> Harness {
    let mut h = Harness::new(|c| c.producer_id_expiration = Some(Duration::from_secs(10)));
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    h.drop_bootstrap_connection();
    h.now += idle;
    h.p.handle_timeout(h.now);
    h.drain();
    a_lost_then_refused_unknown_producer_id(&mut h, log_start);
    h
}

/// Record `a` sent, its first attempt's answer lost with the connection, its retry (the same
/// attempt) refused UNKNOWN_PRODUCER_ID with the log starting at `log_start`; the events
/// cleared before the refusal.
fn a_lost_then_refused_unknown_producer_id(h: &mut Harness, log_start: i64) {
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    let a_seq = epoch_and_sequence(&f);
    // Its answer is lost with the connection.
    let conn = h.conn.expect("connected");
    h.p.handle_disconnected(h.now, conn);
    h.drain();
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    let g = h.answer_until_produce(&[]).expect("a's retry");
    assert_eq!(epoch_and_sequence(&g), a_seq, "the same attempt again");
    h.events.clear();
    h.feed(produce_error_with_log_start(
        &g,
        ErrorCode::UnknownProducerId,
        log_start,
    ));
}

/// A log that starts right after the last acknowledged record was cut before `a`'s first
/// attempt (cut past `a`, it would start beyond `a`'s own offsets): that attempt was refused
/// too, and `a` goes again under the next identity, delivered.
/// `a`, refused UNKNOWN_PRODUCER_ID on its retry, failed nothing: past the backoff it goes
/// again and is delivered.
/// The only failure: UNKNOWN_PRODUCER_ID, possibly persisted (an attempt may be in the log).
fn assert_failed_possibly_persisted_unknown_producer_id(h: &Harness) {
    assert_eq!(
        h.failures(),
        [(
            DeliveryError::Broker(ErrorCode::UnknownProducerId),
            Persistence::PossiblyPersisted
        )],
        "{:?}",
        h.events
    );
}

fn assert_sent_again_and_delivered(mut h: Harness) {
    assert!(h.failures().is_empty(), "{:?}", h.events);
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    h.answer_all();
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "a delivered: {:?}",
        h.events
    );
}

#[test]
fn unknown_producer_id_after_a_cut_before_the_first_attempt_resends() {
    let h = unknown_producer_id_on_a_retry(1);
    assert_sent_again_and_delivered(h);
}

#[test]
fn unknown_producer_id_on_the_retry_of_an_unanswered_batch_is_not_written_again() {
    // The log starts past `a`'s offset (1): `a` may have been written, and cut.
    let mut h = unknown_producer_id_on_a_retry(2);
    assert_failed_possibly_persisted_unknown_producer_id(&h);
    // Nothing of a is written again; the next record goes under the next identity.
    h.p.send(h.now, record("b")).unwrap();
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    let mut produced = Vec::new();
    h.drain();
    while let Some(f) = h.next_frame() {
        if api_of(&f).0 == api_key::PRODUCE {
            produced.push(produce_of(&f));
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    let values: Vec<usize> = (produced.iter())
        .map(|r| {
            r.topic_data[0].partition_data[0]
                .records
                .as_ref()
                .map_or(0, |b| b.len())
        })
        .collect();
    assert_eq!(produced.len(), 1, "b alone: {values:?}");
    assert_eq!(
        deliveries(&h.events).len(),
        1,
        "b delivered: {:?}",
        h.events
    );
}

/// After an idle period, a log that starts right after the last acknowledged record: the
/// deletion that dropped the producer's state came before `a`'s first attempt, which was
/// refused too: written again, delivered. Unless the log starts past `a`'s offset: then `a`
/// may have been written and cut.
#[test]
fn unknown_producer_id_after_idling_resends_unless_the_log_was_cut_past_the_batch() {
    let idle = Duration::from_secs(30);
    let h = unknown_producer_id_on_a_retry_after(1, idle);
    assert_sent_again_and_delivered(h);
    let h = unknown_producer_id_on_a_retry_after(2, idle);
    assert_failed_possibly_persisted_unknown_producer_id(&h);
}

/// From a review of outcome truthfulness: after an idle period (the partition probing), a
/// lost first attempt whose retry is refused UNKNOWN_PRODUCER_ID, the log starting where
/// it always did (0). Idling does not prove the broker forgot the producer before that
/// attempt: one that loses its state after the write (restarted without it on durable
/// storage; Kafka before 2.5 expiring a state dated by old record timestamps right after
/// the append) keeps the batch. So `a` fails possibly persisted and is not written again.
/// Before, it was taken as refused too and sent again under the next identity (a
/// duplicate if the first attempt landed), or failed not persisted at its delivery timeout.
#[test]
fn unknown_producer_id_after_idling_does_not_prove_the_lost_attempt_was_refused() {
    let mut h = unknown_producer_id_on_a_retry_after(0, Duration::from_secs(30));
    assert_failed_possibly_persisted_unknown_producer_id(&h);
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    h.answer_all();
    assert!(deliveries(&h.events).is_empty(), "{:?}", h.events);
}

/// Review finding: UNKNOWN_PRODUCER_ID on a batch at sequence 0 asks for a new producer id
/// (the broker refuses the id at the start of it, Tansu restarted), but sequence 0 comes
/// again after the sequences wrap past their maximum, with batches acknowledged before it:
/// there it is the usual lost producer state, answered with a local epoch bump as at any
/// other sequence, not a new producer id.
#[test]
fn unknown_producer_id_at_a_wrapped_sequence_zero_bumps_the_epoch() {
    let mut h = Harness::new(|c| c.max_sequence = 2);
    for v in ["a", "b", "c"] {
        h.p.send(h.now, record(v)).unwrap();
        h.answer_all();
    }
    assert_eq!(
        h.p.pending_records(),
        0,
        "sequences 0, 1 and 2 acknowledged"
    );
    h.p.send(h.now, record("d")).unwrap();
    let mut inits = 0;
    let mut refused = false;
    let mut epochs = Vec::new();
    for _ in 0..20 {
        h.drain();
        let Some(f) = h.next_frame() else {
            if h.p.pending_records() == 0 {
                break;
            }
            h.now += Duration::from_millis(200);
            h.p.handle_timeout(h.now);
            continue;
        };
        match api_of(&f).0 {
            api_key::PRODUCE => {
                let (epoch, seq) = epoch_and_sequence(&f);
                epochs.push((epoch, seq));
                if !refused {
                    assert_eq!(seq, 0, "d wrapped to sequence 0");
                    refused = true;
                    h.feed(produce_error(&f, ErrorCode::UnknownProducerId));
                    continue;
                }
            }
            api_key::INIT_PRODUCER_ID => inits += 1,
            _ => {}
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    assert_eq!(h.p.pending_records(), 0, "d delivered: {epochs:?}");
    assert_eq!(inits, 0, "no new producer id: {epochs:?}");
    assert_eq!(epochs.last(), Some(&(1, 0)), "sent again under epoch 1");
}

/// Review finding (2026-12-06): `send` placed a record by the caller's `now`, not the
/// producer's clock, so a `now` earlier than the last (against the contract, but a caller's
/// mistake) made a record older than the batch it joined, a debug assertion. Both records are
/// taken and delivered.
#[test]
fn a_send_with_an_earlier_now_joins_the_batch() {
    let mut h = Harness::new(|c| c.linger = Duration::from_millis(5));
    let later = h.now + Duration::from_millis(3);
    let first =
        h.p.send(later, Record::new(TOPIC, "first").with_partition(0))
            .unwrap();
    let second = (h.p)
        .send(h.now, Record::new(TOPIC, "second").with_partition(0))
        .unwrap();
    h.now = later;
    for _ in 0..20 {
        h.answer_all();
        h.now += Duration::from_millis(5);
        h.p.handle_timeout(h.now);
    }
    let delivered: Vec<RecordId> = deliveries(&h.events).iter().map(|d| d.0).collect();
    assert_eq!(delivered, [first, second]);
}

/// Two batches of a partition in flight; the first refused UNKNOWN_SERVER_ERROR (failed
/// possibly persisted: the broker may have written it before failing), the second then
/// refused OUT_OF_ORDER_SEQUENCE_NUMBER (the first is not in the log). Returns the harness.
fn unknown_server_error_then_out_of_order(policy: kprod_core::GapPolicy) -> Harness {
    let mut h = Harness::new(|c| c.gap_policy = policy);
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    let (_, requests) = h.each_in_its_own_request(&["a", "b"]);
    h.feed(produce_error(&requests[0], ErrorCode::UnknownServerError));
    if h.p.fatal_error().is_none() {
        h.feed(produce_error(
            &requests[1],
            ErrorCode::OutOfOrderSequenceNumber,
        ));
    }
    h.answer_all();
    h
}

/// Review finding (2026-12-06): the gap policy applied only to refusals not persisted. A
/// batch refused possibly persisted (UNKNOWN_SERVER_ERROR) that is not in the log leaves
/// the same gap, and under `CutPartition` the batch behind it was re-sequenced under a new
/// epoch and delivered past it. Now the cut takes it.
#[test]
fn a_refusal_possibly_persisted_cuts_the_partition_under_the_cut_policy() {
    let h = unknown_server_error_then_out_of_order(kprod_core::GapPolicy::CutPartition);
    assert_eq!(
        h.failures(),
        [
            (
                DeliveryError::Broker(ErrorCode::UnknownServerError),
                Persistence::PossiblyPersisted
            ),
            (DeliveryError::PartitionCut, Persistence::NotPersisted),
        ],
        "{:?}",
        h.events
    );
    assert_eq!(h.p.pending_records(), 0);
}

/// The same under `Fatal`: the producer stops at the refusal (it went on before, and the
/// batch behind was delivered past the gap).
#[test]
fn a_refusal_possibly_persisted_stops_the_producer_under_the_fatal_policy() {
    let h = unknown_server_error_then_out_of_order(kprod_core::GapPolicy::Fatal);
    assert_eq!(
        h.p.fatal_error(),
        Some(&kprod_core::FatalError::Gap(ErrorCode::UnknownServerError))
    );
    assert!(deliveries(&h.events).len() == 1, "only x: {:?}", h.events);
    assert_eq!(h.p.pending_records(), 0);
}

/// Under `Fatal`, records failed for want of a producer id (CLUSTER_AUTHORIZATION_FAILED on
/// InitProducerId) are a gap too: records sent later would land past them. The producer
/// stops (it asked again after the backoff before, and went on once allowed).
#[test]
fn an_authorization_refusal_of_the_producer_id_stops_the_producer_under_the_fatal_policy() {
    use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};

    let mut h = Harness::new(|c| c.gap_policy = kprod_core::GapPolicy::Fatal);
    h.p.send(h.now, record("x")).unwrap();
    let mut wires = Wires::new();
    let mut answer = |h: &mut Harness, _, f: Bytes| {
        let (key, version, corr) = api_of(&f);
        Some(if key == api_key::INIT_PRODUCER_ID {
            let refused = InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: ErrorCode::ClusterAuthorizationFailed.as_i16(),
                producer_id: -1,
                producer_epoch: -1,
            };
            encode_response::<InitProducerIdRequest>(&refused, version, corr)
        } else {
            respond(&f, &mut h.next_offset)
        })
    };
    // The first refusal may come before the record has a batch (it waits for metadata):
    // the producer asks again after the backoff.
    for _ in 0..5 {
        while pump(&mut h, &mut wires, &mut answer) {}
        h.now += Duration::from_secs(1);
        h.p.handle_timeout(h.now);
    }
    assert_eq!(
        h.p.fatal_error(),
        Some(&kprod_core::FatalError::Gap(
            ErrorCode::ClusterAuthorizationFailed
        )),
        "{:?}",
        h.events
    );
    assert_eq!(
        h.failures(),
        [(
            DeliveryError::Broker(ErrorCode::ClusterAuthorizationFailed),
            Persistence::NotPersisted
        )]
    );
}

/// Review finding (2026-12-06): a partition's outcomes went out in the order the producer
/// learned them. Batch a answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (retried, possibly
/// written), batch b behind it answered success: b was reported delivered first, though
/// the Java client's documentation promises callbacks of a partition in send order. b's
/// outcome now waits for a's.
#[test]
fn a_partitions_outcomes_go_out_in_send_order_around_a_retry() {
    let mut h = Harness::new(|_| {});
    let x = h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    let (ids, requests) = h.each_in_its_own_request(&["a", "b"]);
    h.feed(produce_error(
        &requests[0],
        ErrorCode::NotEnoughReplicasAfterAppend,
    ));
    let b = respond(&requests[1], &mut h.next_offset);
    h.feed(b);
    let delivered: Vec<RecordId> = deliveries(&h.events).iter().map(|d| d.0).collect();
    assert_eq!(delivered, [x], "b waits for a");
    for _ in 0..20 {
        h.answer_all();
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
    }
    let delivered: Vec<RecordId> = deliveries(&h.events).iter().map(|d| d.0).collect();
    assert_eq!(delivered, [x, ids[0], ids[1]]);
    assert_eq!(h.p.pending_records(), 0);
}

/// A failed record goes back to the application with its outcome, so while that outcome is
/// held behind an earlier record of its partition, its bytes stay charged to
/// `buffer.memory` (before, they were given back at once: a slow earlier batch could pile
/// up failed records beyond the bound).
#[test]
fn a_held_failure_keeps_its_records_charged_until_it_goes_out() {
    let mut h = Harness::new(|_| {});
    let x = h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    let (ids, requests) = h.each_in_its_own_request(&["a", "b"]);
    let both = h.p.buffered_bytes();
    h.feed(produce_error(
        &requests[0],
        ErrorCode::NotEnoughReplicasAfterAppend,
    ));
    h.feed(produce_error(&requests[1], ErrorCode::InvalidRecord));
    assert!(
        !h.events.iter().any(|e| matches!(e, Event::Failed { .. })),
        "b's failure waits for a"
    );
    assert_eq!(
        h.p.buffered_bytes(),
        both,
        "b's record is still held, and charged"
    );
    for _ in 0..20 {
        h.answer_all();
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
    }
    let delivered: Vec<RecordId> = deliveries(&h.events).iter().map(|d| d.0).collect();
    assert_eq!(delivered, [x, ids[0]]);
    assert_eq!(
        h.failures(),
        [(
            DeliveryError::Broker(ErrorCode::InvalidRecord),
            Persistence::NotPersisted
        )]
    );
    assert_eq!(h.p.buffered_bytes(), 0);
    assert_eq!(h.p.pending_records(), 0);
}

/// The diff review of 2026-12-06: a partition acknowledged only without an offset (a success
/// at offset -1, or Tansu's DUPLICATE_SEQUENCE_NUMBER) keeps -1 as its last acknowledged
/// offset, and "the offset right after it", 0, was compared with the log start of an
/// UNKNOWN_PRODUCER_ID: a log starting at 0 made `a`, whose first attempt went unanswered,
/// look refused before it was written, and it was sent again under a new identity (a
/// possible duplicate). With the offset unknown, `a` stays possibly persisted.
#[test]
fn unknown_producer_id_is_not_judged_by_an_unknown_acknowledged_offset() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("x")).unwrap();
    let f = h.answer_until_produce(&[]).expect("x's request");
    let a = produce_rewrite(&f, &mut h.next_offset, |r| {
        r.responses[0].partition_responses[0].base_offset = -1
    });
    h.feed(a);
    assert_eq!(deliveries(&h.events), [(RecordId(0), 0, None)]);
    h.drop_bootstrap_connection();
    a_lost_then_refused_unknown_producer_id(&mut h, 0);
    assert_failed_possibly_persisted_unknown_producer_id(&h);
}

/// Review finding: `precheck` (the refusals kprod-tokio applies to a record queued behind
/// others waiting for memory) gave a closed or failed producer's record its own refusal
/// (too large, say) where `send` says `Closed` first; now it says `Closed` first too, and
/// otherwise refuses what `send` refuses, whatever the buffer's room.
#[test]
fn precheck_says_closed_first_and_refuses_what_send_refuses() {
    let mut h = Harness::new(|c| c.max_request_size = 1024);
    let big = || Record::new("t", "x".repeat(2000));
    let ok =
        h.p.precheck(h.now, record("fine"))
            .expect("nothing to refuse");
    assert_eq!(ok.value.as_deref(), Some(&b"fine"[..]));
    assert!(matches!(
        h.p.precheck(h.now, big()),
        Err(kprod_core::SendError::TooLarge { .. })
    ));
    assert!(matches!(
        h.p.precheck(h.now, Record::new("bad topic!", "v")),
        Err(kprod_core::SendError::InvalidTopic(_))
    ));
    h.p.close(h.now);
    assert!(matches!(
        h.p.precheck(h.now, big()),
        Err(kprod_core::SendError::Closed(_))
    ));
    assert!(matches!(
        h.p.send(h.now, big()),
        Err(kprod_core::SendError::Closed(_))
    ));
}

/// Review finding (2026-12-06, Redpanda's source): Redpanda refuses a batch whose sequence
/// range wraps past the largest sequence (its last below its first) with INVALID_REQUEST,
/// and its leader steps down, where Kafka takes it: once every 2^31 records of a partition
/// the batch failed and those behind it became possibly persisted. A batch is now closed at
/// the wrap: with sequences up to 7 and five acknowledged, five more records go as 5..=7 and
/// 0..=1, never one batch 5..=1.
#[test]
fn no_batch_crosses_the_sequence_wrap() {
    let mut h = Harness::new(|c| c.max_sequence = 7);
    for i in 0..5 {
        h.p.send(h.now, record(&format!("a{i}"))).unwrap();
    }
    h.answer_all();
    h.drop_bootstrap_connection();
    assert_eq!(deliveries(&h.events).len(), 5, "{:?}", h.events);
    for i in 0..5 {
        h.p.send(h.now, record(&format!("b{i}"))).unwrap();
    }
    let mut batches = Vec::new();
    while let Some(f) = h.answer_until_produce(&[]) {
        let records = produce_of(&f).topic_data[0].partition_data[0]
            .records
            .clone()
            .unwrap();
        let count = i32::from_be_bytes(records[57..61].try_into().unwrap());
        batches.push((epoch_and_sequence(&f).1, count));
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    assert_eq!(batches, vec![(5, 3), (0, 2)]);
    assert_eq!(deliveries(&h.events).len(), 10, "{:?}", h.events);
}

/// Review findings (2026-12-06, Redpanda's source; 2026-12-07, Kafka-compatible brokers):
/// Redpanda answers POLICY_VIOLATION (44) to every Produce in its recovery mode and past a
/// virtual cluster's producer limit, and Azure Event Hubs to a request it throttles past
/// the namespace's throughput units, before writing anything. kprod did not know the code
/// and failed the batch possibly persisted; then it failed it at once, not persisted, where
/// Event Hubs' throttle wanted a retry. It is now retried as unwritten until the delivery
/// timeout, and fails not persisted, saying what the code means on each broker.
#[test]
fn policy_violation_is_retried_as_unwritten() {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(5);
        c.delivery_timeout = Duration::from_secs(10);
    });
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    h.events.clear();
    h.feed(produce_error(&f, ErrorCode::PolicyViolation));
    assert_eq!(h.failures(), vec![]);
    // Throttled again, then taken: delivered, once.
    let mut answered = 0;
    for _ in 0..50 {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        h.drain();
        if let Some(f) = h.answer_until_produce(&[]) {
            answered += 1;
            let answer = if answered == 1 {
                produce_error(&f, ErrorCode::PolicyViolation)
            } else {
                respond(&f, &mut h.next_offset)
            };
            h.feed(answer);
        }
        if !deliveries(&h.events).is_empty() {
            break;
        }
    }
    assert_eq!(answered, 2, "{:?}", h.events);
    assert_eq!(deliveries(&h.events).len(), 1, "{:?}", h.events);
    assert_eq!(h.failures(), vec![]);

    // Refused until the delivery timeout: not persisted, and the error says where to look.
    h.events.clear();
    h.p.send(h.now, record("b")).unwrap();
    let end = h.now + Duration::from_secs(11);
    while h.now < end {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        h.drain();
        if let Some(f) = h.answer_until_produce(&[]) {
            h.feed(produce_error(&f, ErrorCode::PolicyViolation));
        }
    }
    let failures = h.failures();
    assert_eq!(
        failures,
        vec![(
            DeliveryError::DeliveryTimeout {
                last_error: Some(ErrorCode::PolicyViolation)
            },
            Persistence::NotPersisted
        )]
    );
    let text = failures[0].0.to_string();
    assert!(
        text.contains("Event Hubs") && text.contains("recovery mode"),
        "{text}"
    );
}

/// Batch a refused NOT_ENOUGH_REPLICAS (not written) while b, behind it, is accepted (a
/// broker that lost the producer's state takes b's sequence), then a's retry refused
/// OUT_OF_ORDER_SEQUENCE_NUMBER, while c waits behind them. Returns the harness and c's id.
fn overtaken_then_refused(policy: kprod_core::GapPolicy) -> (Harness, RecordId) {
    let mut h = Harness::new(|c| c.gap_policy = policy);
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    let (_, requests) = h.each_in_its_own_request(&["a", "b"]);
    h.feed(produce_error(&requests[0], ErrorCode::NotEnoughReplicas));
    let b = respond(&requests[1], &mut h.next_offset);
    h.feed(b);
    for _ in 0..20 {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        h.drain();
        if let Some(retry) = h.next_frame() {
            // c is buffered (not drained) when the refusal comes in.
            let c = h.p.send(h.now, record("c")).unwrap();
            h.feed(produce_error(&retry, ErrorCode::OutOfOrderSequenceNumber));
            return (h, c);
        }
    }
    panic!("a's retry never went: {:?}", h.events)
}

/// Review finding (2026-12-07): a batch overtaken by a later one (acknowledged while it
/// waited for its retry) and then refused for good failed without the gap policy, so
/// `Fatal` went on past the gap. It stops now.
#[test]
fn an_overtaken_batch_refused_for_good_stops_the_producer_under_the_fatal_policy() {
    let (h, _) = overtaken_then_refused(kprod_core::GapPolicy::Fatal);
    assert_eq!(
        h.p.fatal_error(),
        Some(&kprod_core::FatalError::Gap(
            ErrorCode::OutOfOrderSequenceNumber
        )),
        "{:?}",
        h.events
    );
    assert_eq!(h.p.pending_records(), 0);
}

/// The same under `CutPartition`: the refused batch fails not persisted, and the record
/// buffered behind it is cut rather than written past the gap.
#[test]
fn an_overtaken_batch_refused_for_good_cuts_the_partition_under_the_cut_policy() {
    let (mut h, c) = overtaken_then_refused(kprod_core::GapPolicy::CutPartition);
    h.answer_all();
    assert_eq!(
        h.failures(),
        [
            (
                DeliveryError::Broker(ErrorCode::OutOfOrderSequenceNumber),
                Persistence::NotPersisted
            ),
            (DeliveryError::PartitionCut, Persistence::NotPersisted),
        ],
        "{:?}",
        h.events
    );
    assert!(!deliveries(&h.events).iter().any(|d| d.0 == c));
    assert_eq!(h.p.pending_records(), 0);
}

/// Review finding (the sans-IO contract, a seventh session of 2026-12-07): a producer that
/// failed for good while closing never said it was closed, though every record had resolved
/// and every connection was closed: a driver waiting for `is_closed` waited for ever.
#[test]
fn a_producer_failing_while_it_closes_is_closed() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("a")).unwrap();
    h.answer_until_produce(&[]).expect("a's request");
    h.p.close(h.now);
    h.drain();
    assert!(!h.p.is_closed(), "a is in flight");
    h.p.abort(h.now, "the driver's certificate check failed");
    h.drain();
    assert!(h.p.is_closed());
    assert_eq!(h.failures().len(), 1);
    // Not closing: a failed producer is not a closed one.
    let mut h = Harness::new(|_| {});
    h.p.abort(h.now, "stop");
    assert!(!h.p.is_closed());
}

/// From a review of the lifecycle: a producer closed before it had a producer id or any
/// metadata answer (no broker reachable) asked for them again at the next call after the
/// close, on a new connection that nothing would ever close (a closed producer has no
/// deadline). A closed producer asks nothing more of any broker.
#[test]
fn a_producer_closed_before_reaching_the_cluster_connects_no_more() {
    let mut h = Harness::new(|_| {});
    h.p.close(h.now);
    let mut connects = 0;
    loop {
        match h.p.poll_output() {
            Output::Wait { .. } => break,
            Output::Connect { .. } => connects += 1,
            _ => {}
        }
    }
    assert!(h.p.is_closed());
    for _ in 0..50 {
        h.now += Duration::from_secs(10);
        h.p.handle_timeout(h.now);
        h.p.flush(h.now);
        let o = h.p.poll_output();
        assert!(matches!(o, Output::Wait { .. }), "after the close: {o:?}");
    }
    assert!(
        connects <= 1,
        "{connects} connects before the close finished"
    );
}

/// From a review of the lifecycle: an abort with a sequenced batch in flight failed it (a
/// gap), and the gap asked for an epoch bump after the fatal error: an "epoch bumped" log
/// line after "producer failed", and `Metrics::epoch_bumps` one higher than what happened.
#[test]
fn an_abort_with_a_batch_in_flight_bumps_nothing() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    h.p.send(h.now, record("a")).unwrap();
    h.answer_until_produce(&[])
        .expect("a's request, unanswered");
    h.events.clear();
    h.p.abort(h.now, "the application gives up");
    h.drain();
    let bumped =
        (h.events.iter()).any(|e| matches!(e, Event::Diagnostic(Diagnostic::EpochBumped(_))));
    assert!(!bumped, "{:?}", h.events);
    assert_eq!(h.p.metrics().epoch_bumps, 0);
}

/// Review finding (error-table drift): codes Kafka's `Errors` marks retriable but that no
/// Apache Kafka broker answers a Produce with today (INCONSISTENT_TOPIC_ID from a broker
/// naming topics by id, LISTENER_NOT_FOUND mid-way through a listener change, ...) failed
/// their batch possibly persisted with a gap, and stopped a producer under
/// `GapPolicy::Fatal`. Now the batch is retried with its sequence and delivered, as the Java
/// client retries them.
#[test]
fn a_retriable_code_unused_by_produce_today_is_retried_with_its_sequence() {
    for code in [14, 15, 16, 41, 70, 71, 72, 78, 80, 83, 88, 103, 106].map(ErrorCode::from_i16) {
        let mut h = Harness::new(|c| c.gap_policy = kprod_core::GapPolicy::Fatal);
        let id = h.p.send(h.now, record("a")).unwrap();
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        let first = epoch_and_sequence(&f);
        h.feed(produce_error(&f, code));
        h.now += Duration::from_secs(2);
        h.p.handle_timeout(h.now);
        let f = h.answer_until_produce(&[]).expect("the retry");
        assert_eq!(
            epoch_and_sequence(&f),
            first,
            "{code}: the same epoch and sequence"
        );
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
        assert_eq!(h.failures(), [], "{code}");
        assert_eq!(deliveries(&h.events), [(id, 0, Some(0))], "{code}");
        assert!(h.p.fatal_error().is_none(), "{code}");
    }
}

/// Review finding (2026-12-07, Kafka-compatible brokers): Redpanda before 24.1.15 and 24.2.2
/// keeps a producer's sequence across epochs, so it refuses the first batch of an epoch the
/// producer bumped itself (sequence 0) OUT_OF_ORDER_SEQUENCE_NUMBER, with a log start of -1
/// as in all its answers. Each refusal made another local bump, refused alike: every
/// partition stalled until the producer id's epochs ran out. Now such a refusal, asked again
/// once (a Kafka broker that just stopped leading answers -1 too) and refused again, turns
/// local bumps off as Tansu's PRODUCER_FENCED does: a new producer id, under which the batch
/// goes and is delivered.
#[test]
fn a_broker_refusing_a_local_bump_out_of_order_gets_a_new_producer_id() {
    let mut h = Harness::new(|c| c.request_timeout = Duration::from_secs(5));
    h.p.send(h.now, record("x")).unwrap();
    h.answer_all();
    assert_eq!(deliveries(&h.events).len(), 1);
    // A record refused for good: a gap, so the next batch starts a new epoch.
    h.p.send(h.now, record("bad")).unwrap();
    let f = h.answer_until_produce(&[]).expect("bad's request");
    h.feed(produce_error(&f, ErrorCode::InvalidRecord));
    let bumps = |h: &Harness| {
        (h.events.iter())
            .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::EpochBumped(_))))
            .count()
    };
    let new_ids = |h: &Harness| {
        (h.events.iter())
            .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::ProducerId(_))))
            .count()
    };
    assert_eq!((bumps(&h), new_ids(&h)), (1, 1), "{:?}", h.events);

    h.p.send(h.now, record("c")).unwrap();
    let mut refused = 0;
    for _ in 0..100 {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        h.drain();
        let Some(f) = h.answer_until_produce(&[]) else {
            continue;
        };
        let (epoch, seq) = epoch_and_sequence(&f);
        if epoch > 0 {
            // The old Redpanda: any epoch past the first, at sequence 0, is out of order.
            assert_eq!(seq, 0);
            refused += 1;
            h.feed(produce_error_with_log_start(
                &f,
                ErrorCode::OutOfOrderSequenceNumber,
                -1,
            ));
        } else {
            let a = respond(&f, &mut h.next_offset);
            h.feed(a);
        }
        if deliveries(&h.events).len() == 2 {
            break;
        }
    }
    assert_eq!(deliveries(&h.events).len(), 2, "{:?}", h.events);
    assert_eq!(refused, 2, "{:?}", h.events);
    assert_eq!((bumps(&h), new_ids(&h)), (1, 2), "{:?}", h.events);
}
