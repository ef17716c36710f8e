//! Backoffs are spread (`ProducerConfig::backoff_jitter_percent`, 20 % by default) so that
//! producers that lost a broker at the same moment do not come back in lockstep, without
//! randomness in the core: the spread is a hash of the producer's own clock.

mod harness;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use harness::{api_of, epoch_and_sequence, produce_error, respond, Harness, TOPIC};
use kprod_core::protocol::api_key;
use kprod_core::protocol::ErrorCode;
use kprod_core::{ConnId, Output, Producer, ProducerConfig, Record};

/// Carries out nothing: the connect asked for, if any, and the deadline the producer waits for.
fn drain(p: &mut Producer) -> (Option<ConnId>, Option<Instant>) {
    let mut conn = None;
    loop {
        match p.poll_output() {
            Output::Wait { until } => return (conn, until),
            Output::Connect { conn: c, .. } => conn = Some(c),
            _ => {}
        }
    }
}

fn producer(t0: Instant, tune: impl FnOnce(&mut ProducerConfig)) -> Producer {
    let mut cfg = ProducerConfig {
        bootstrap_servers: vec!["b:9092".into()],
        // Only the reconnect backoff is waited for below.
        bootstrap_patience: None,
        ..ProducerConfig::default()
    };
    tune(&mut cfg);
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    p
}

/// The reconnect backoff after each of `failures` failed connects, the first failing `first`
/// after the producer was made and each next one as soon as it is asked for.
fn reconnect_delays(p: &mut Producer, t0: Instant, first: Duration, failures: usize) -> Vec<u128> {
    let (conn, _) = drain(p);
    let mut conn = conn.expect("a first connect");
    let mut now = t0 + first;
    let mut delays = Vec::new();
    for _ in 0..failures {
        p.handle_connect_failed(now, conn);
        let (again, until) = drain(p);
        assert!(again.is_none(), "connected again at once");
        let until = until.expect("a reconnect deadline");
        delays.push((until - now).as_micros());
        now = until;
        p.handle_timeout(now);
        conn = drain(p).0.expect("the reconnect, at its deadline");
    }
    delays
}

/// Forty producers made at the same moment whose broker refuses them a few microseconds
/// apart (as a fleet losing one broker would) come back at forty different moments, each
/// within 20 % of `reconnect.backoff.ms` (50 ms). Without the spread all forty came back
/// exactly 50 ms after their failure.
#[test]
fn producers_refused_together_reconnect_apart() {
    let t0 = Instant::now();
    let mut delays = BTreeSet::new();
    for i in 0..40u64 {
        let mut p = producer(t0, |_| {});
        let first = Duration::from_millis(3) + Duration::from_micros(7 * i);
        let d = reconnect_delays(&mut p, t0, first, 1)[0];
        assert!((40_000..=60_000).contains(&d), "producer {i}: {d} µs");
        delays.insert(d);
    }
    assert!(
        delays.len() >= 35,
        "{} distinct delays: {delays:?}",
        delays.len()
    );
    let (lo, hi) = (delays.first().unwrap(), delays.last().unwrap());
    assert!(hi - lo >= 10_000, "spread only from {lo} to {hi} µs");
}

/// The spread follows the doubling and never passes the maximum: after k failures in a row
/// the wait is within 20 % of 50 ms · 2^k, held to `retry.backoff.max.ms` (1 s), so from
/// 0.8 s to 1 s once there (half of them exactly 1 s).
#[test]
fn the_spread_doubles_with_the_backoff_and_stays_under_the_maximum() {
    let t0 = Instant::now();
    let mut p = producer(t0, |_| {});
    let delays = reconnect_delays(&mut p, t0, Duration::from_millis(1), 12);
    let mut at_max = BTreeSet::new();
    for (k, d) in delays.iter().enumerate() {
        let nominal = (50_000u128 << k).min(1_000_000);
        let (lo, hi) = (nominal * 8 / 10, (nominal * 12 / 10).min(1_000_000));
        assert!(
            (lo..=hi).contains(d),
            "failure {k}: {d} µs, not in {lo}..={hi}: {delays:?}"
        );
        if nominal == 1_000_000 {
            at_max.insert(*d);
        }
    }
    // Those the spread would take above the maximum wait the maximum (as in the Java
    // client): the others are spread below it.
    assert!(
        at_max.len() >= 3,
        "waits at the maximum not spread: {delays:?}"
    );
}

/// A batch's retry is spread too: twenty producers whose Produce draws a retriable error
/// (NOT_ENOUGH_REPLICAS) a few microseconds apart retry within 20 % of `retry.backoff.ms`
/// (100 ms), not all after exactly 100 ms.
#[test]
fn retries_of_batches_refused_together_are_spread() {
    let mut delays = BTreeSet::new();
    for i in 0..20u64 {
        let mut h = Harness::new(|c| c.backoff_jitter_percent = 20);
        h.p.send(h.now, Record::new(TOPIC, "v").with_partition(0))
            .unwrap();
        let produce = h.answer_until_produce(&[]).expect("a Produce request");
        h.now += Duration::from_millis(2) + Duration::from_micros(11 * i);
        h.feed(produce_error(&produce, ErrorCode::NotEnoughReplicas));
        // Nothing to do before the retry: the producer waits for its backoff.
        let until = match h.p.poll_output() {
            Output::Wait { until } => until.expect("a retry deadline"),
            o => panic!("nothing to do before the retry: {o:?}"),
        };
        let d = (until - h.now).as_micros();
        assert!((80_000..=120_000).contains(&d), "producer {i}: {d} µs");
        delays.insert(d);
        // And the retry goes at that deadline.
        h.now = until;
        h.p.handle_timeout(h.now);
        let retried = h.answer_until_produce(&[]).expect("the retry");
        assert_eq!(api_of(&retried).0, api_key::PRODUCE);
    }
    assert!(
        delays.len() >= 15,
        "{} distinct delays: {delays:?}",
        delays.len()
    );
}

/// The batches of one partition refused together are due together: its head is resent
/// first, and once it is acknowledged the next goes at once, not after a spread of its own.
#[test]
fn batches_of_one_partition_refused_together_are_retried_together() {
    for i in 0..20u64 {
        let mut h = Harness::new(|c| c.backoff_jitter_percent = 20);
        h.now += Duration::from_micros(13 * i);
        // One acknowledged first: until then a partition has one batch in flight.
        h.p.send(h.now, Record::new(TOPIC, "z").with_partition(0))
            .unwrap();
        h.answer_all();
        h.p.send(h.now, Record::new(TOPIC, "a").with_partition(0))
            .unwrap();
        let first = h.answer_until_produce(&[]).expect("the first batch");
        h.p.send(h.now, Record::new(TOPIC, "b").with_partition(0))
            .unwrap();
        h.drain();
        let second = h
            .next_frame()
            .expect("the second batch, in flight beside it");
        assert_eq!(epoch_and_sequence(&second).1, 2);
        h.now += Duration::from_millis(3);
        h.feed(produce_error(&first, ErrorCode::NotEnoughReplicas));
        h.feed(produce_error(&second, ErrorCode::NotEnoughReplicas));
        let Output::Wait { until: Some(due) } = h.p.poll_output() else {
            panic!("waiting for the retry")
        };
        h.now = due;
        h.p.handle_timeout(h.now);
        let head = h.answer_until_produce(&[]).expect("the head's resend");
        assert_eq!(epoch_and_sequence(&head).1, 1);
        let ok = respond(&head, &mut h.next_offset);
        h.feed(ok);
        let next = h
            .next_frame()
            .expect("the next batch at once, at the head's deadline");
        assert_eq!(epoch_and_sequence(&next).1, 2, "producer {i}");
    }
}

/// The spread is a function of what the producer was told and when: two producers given the
/// same inputs at the same moments are equal in every state (the model checker relies on
/// it), and one failure a microsecond later waits differently.
#[test]
fn the_spread_is_deterministic() {
    let t0 = Instant::now();
    let mut a = producer(t0, |_| {});
    let mut b = producer(t0, |_| {});
    let da = reconnect_delays(&mut a, t0, Duration::from_millis(5), 6);
    let db = reconnect_delays(&mut b, t0, Duration::from_millis(5), 6);
    assert_eq!(da, db);
    assert_eq!(a, b);
    let mut c = producer(t0, |_| {});
    let dc = reconnect_delays(
        &mut c,
        t0,
        Duration::from_millis(5) + Duration::from_micros(1),
        6,
    );
    assert_ne!(da, dc);
}

/// A constant backoff is waited exactly, as the Java client does: `retry.backoff.ms` equal to
/// `retry.backoff.max.ms` (and `reconnect.backoff.ms` at or above it); so is every backoff
/// with the spread turned off.
#[test]
fn a_constant_backoff_or_a_zero_percent_is_not_spread() {
    let t0 = Instant::now();
    let constant = |c: &mut ProducerConfig| {
        c.reconnect_backoff = Duration::from_millis(300);
        c.retry_backoff = Duration::from_millis(300);
        c.retry_backoff_max = Duration::from_millis(300);
    };
    let mut p = producer(t0, constant);
    let delays = reconnect_delays(&mut p, t0, Duration::from_millis(1), 4);
    assert_eq!(delays, vec![300_000; 4]);
    let mut p = producer(t0, |c| c.backoff_jitter_percent = 0);
    let delays = reconnect_delays(&mut p, t0, Duration::from_micros(1234), 6);
    assert_eq!(
        delays,
        vec![50_000, 100_000, 200_000, 400_000, 800_000, 1_000_000]
    );
}

/// More than 50 % could bring a backoff down to nothing: refused, with the setting named.
#[test]
fn a_spread_above_half_is_refused() {
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["b:9092".into()],
        backoff_jitter_percent: 51,
        ..ProducerConfig::default()
    };
    let e = Producer::new(cfg.clone(), Instant::now()).unwrap_err();
    assert_eq!(e.setting, "kprod.backoff.jitter.percent", "{e}");
    let ok = ProducerConfig {
        backoff_jitter_percent: 50,
        ..cfg
    };
    assert!(Producer::new(ok, Instant::now()).is_ok());
}
