//! `ProducerConfig::late_wake_grace`: a driver that comes back well after the deadline it
//! was given (a stalled process) has the answers that arrived meanwhile read before the
//! timeouts that passed during the stall are acted on.

mod harness;

use std::time::Duration;

use bytes::Bytes;

use harness::{deliveries, respond, Harness, TOPIC};
use kprod_core::{Event, Record};

fn record(v: &str) -> Record {
    Record::new(TOPIC, v.to_owned()).with_partition(0)
}

/// A record's request in flight, then the driver back `stall` after it, at a timer; the
/// answer read `read_after` later. Returns whether the record was delivered, and the
/// connections opened and retries counted by then.
fn stalled(grace: Option<Duration>, stall: Duration, read_after: Duration) -> (bool, u64, u64) {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(5);
        c.delivery_timeout = Duration::from_secs(8);
        c.late_wake_grace = grace;
    });
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    h.now += stall;
    h.p.handle_timeout(h.now);
    h.drain();
    h.now += read_after;
    if h.conn.is_some() {
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    let delivered = deliveries(&h.events).len() == 1
        && !h.events.iter().any(|e| matches!(e, Event::Failed { .. }));
    let m = h.p.metrics();
    (delivered, m.connections_opened, m.retries)
}

#[test]
fn an_answer_that_came_during_a_stall_is_read_before_the_timeouts() {
    let stall = Duration::from_secs(20);
    // Past the request timeout (5 s) and the delivery timeout (8 s), with the answer read
    // right after the driver is back: delivered on its connection, no retry.
    let grace = Some(Duration::from_secs(1));
    assert_eq!(
        stalled(grace, stall, Duration::from_millis(10)),
        (true, 2, 0)
    );
    // Without the grace the request timed out and the record failed, though the broker
    // had acknowledged it.
    assert!(!stalled(None, stall, Duration::from_millis(10)).0);
    // A stall shorter than the grace's threshold past the deadline is no stall.
    let (delivered, _, _) = stalled(grace, Duration::from_millis(5500), Duration::ZERO);
    assert!(!delivered, "timed out at once, 0.5 s past its deadline");
}

/// A producer with a 5 s request timeout and a 1 s grace, record "a"'s Produce request in
/// flight (returned).
fn a_in_flight() -> (Harness, Bytes) {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(5);
        c.late_wake_grace = Some(Duration::from_secs(1));
    });
    h.p.send(h.now, record("a")).unwrap();
    let f = h.answer_until_produce(&[]).expect("a's request");
    (h, f)
}

/// Answers the request `f`, and checks its record was delivered.
fn answered(h: &mut Harness, f: &Bytes) {
    let a = respond(f, &mut h.next_offset);
    h.feed(a);
    assert!(!deliveries(&h.events).is_empty(), "{:?}", h.events);
}

#[test]
fn the_grace_ends_and_a_request_still_unanswered_times_out() {
    let (mut h, _) = a_in_flight();
    h.now += Duration::from_secs(20);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_some(), "within the grace");
    h.now += Duration::from_millis(999);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_some(), "within the grace");
    h.now += Duration::from_millis(1);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_none(), "timed out when the grace ended");
    assert_eq!(h.p.metrics().retries, 1);
}

/// Review finding (of the change): a driver late at every wake-up (a runtime blocked over
/// and over) got a new grace each time, and a hung broker's request never timed out. A new
/// grace comes only after the timeouts have run.
#[test]
fn a_driver_late_every_time_still_times_a_hung_request_out() {
    let (mut h, _) = a_in_flight();
    let mut wakes = 0;
    while h.conn.is_some() && wakes < 50 {
        let until = match h.p.poll_output() {
            kprod_core::Output::Wait { until } => until.expect("a deadline"),
            o => panic!("{o:?}"),
        };
        h.now = until + Duration::from_millis(1500);
        h.p.handle_timeout(h.now);
        h.drain();
        wakes += 1;
    }
    assert!(h.conn.is_none(), "never timed out in {wakes} late wake-ups");
    assert!(wakes <= 6, "{wakes} wake-ups");
}

/// Review finding (of the change): a stall seen by an application thread's `send` (the
/// driver still held up) started the grace then, and it had run out when the driver came
/// back. It runs from the driver's first drain.
#[test]
fn a_stall_seen_by_a_send_waits_for_the_drivers_drain() {
    let (mut h, f) = a_in_flight();
    // A send 10 s on, with no drain (the driver is held up); the driver back at 20 s.
    h.now += Duration::from_secs(10);
    h.p.send(h.now, record("b")).unwrap();
    h.now += Duration::from_secs(10);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_some(), "within the grace");
    answered(&mut h, &f);
}

/// Review finding (of the change): the grace held the idle close back too, though an idle
/// connection waits for no answer: after a stall past `connections.max.idle.ms` the next
/// record went onto a connection the broker had likely closed.
#[test]
fn a_stall_past_the_idle_limit_still_closes_idle_connections() {
    let mut h = Harness::new(|c| c.late_wake_grace = Some(Duration::from_secs(1)));
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    let opened = h.p.metrics().connections_opened;
    h.now += Duration::from_secs(600);
    h.p.handle_timeout(h.now);
    h.drain();
    h.p.send(h.now, record("b")).unwrap();
    h.answer_all();
    assert_eq!(deliveries(&h.events).len(), 2);
    assert!(
        h.p.metrics().connections_opened > opened,
        "a new connection"
    );
}

/// Review finding (of the change): a driver whose first input after a stall was a send
/// (a loop that took the record channel first) and that then drained got no grace: a send
/// did not look for the stall. The drain does now, whatever came before it.
#[test]
fn a_drain_after_a_stall_gets_the_grace_whatever_its_first_input() {
    let (mut h, f) = a_in_flight();
    h.now += Duration::from_secs(20);
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    assert!(h.conn.is_some(), "within the grace");
    answered(&mut h, &f);
}

/// Review finding (the sans-IO contract, a seventh session of 2026-12-07): a grace of zero
/// (kprod-tokio's way to turn it off) started a grace ending at the drain itself, held every
/// timeout back, and gave no deadline for them: a hung request timed out only at the next
/// unrelated input, and in debug builds the index check failed. Zero is no grace.
#[test]
fn a_grace_of_zero_is_no_grace() {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(5);
        c.late_wake_grace = Some(Duration::ZERO);
    });
    h.p.send(h.now, record("a")).unwrap();
    h.answer_until_produce(&[]).expect("a's request");
    // A timer a little late, as real timers are.
    h.now += Duration::from_millis(5001);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.conn.is_none(), "the hung request timed out");
    assert_eq!(h.p.metrics().retries, 1);
}
