//! The connect deadline lives in the core: a `Connect` the driver never answers is closed
//! after `ProducerConfig::connect_timeout` and treated as a failed connect.

use std::time::{Duration, Instant};

use kprod_core::{ConnId, Diagnostic, Event, Output, Producer, ProducerConfig, Record};

fn drain(p: &mut Producer) -> (Vec<Output>, Option<Instant>) {
    let mut outs = Vec::new();
    loop {
        match p.poll_output() {
            Output::Wait { until } => return (outs, until),
            o => outs.push(o),
        }
    }
}

fn connects(outs: &[Output]) -> Vec<(ConnId, String)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Connect { conn, addr } => Some((*conn, addr.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unanswered_connect_fails_at_the_connect_timeout() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into(), "10.0.0.2:9092".into()],
        connect_timeout: Duration::from_secs(3),
        // Without patience (below), one server at a time.
        bootstrap_patience: None,
        // The reconnect backoff checked to the millisecond.
        backoff_jitter_percent: 0,
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let (outs, until) = drain(&mut p);
    let first = connects(&outs);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].1, "10.0.0.1:9092");
    let conn = first[0].0;
    assert_eq!(
        until,
        Some(t0 + Duration::from_secs(3)),
        "the connect deadline is the wait"
    );

    // Just before the deadline nothing happens.
    p.handle_timeout(t0 + Duration::from_millis(2999));
    let (outs, _) = drain(&mut p);
    assert!(outs.is_empty(), "{outs:?}");

    // At the deadline the connection is closed and counted as failed.
    p.handle_timeout(t0 + Duration::from_secs(3));
    let (outs, until) = drain(&mut p);
    assert!(
        outs.contains(&Output::Close { conn, flush: false }),
        "{outs:?}"
    );
    assert!(
        outs.contains(&Output::Event(Event::Diagnostic(
            Diagnostic::Disconnected {
                conn,
                addr: "10.0.0.1:9092".into(),
                node: None,
                reason: "connect timeout"
            }
        ))),
        "{outs:?}"
    );
    // The next bootstrap server is tried at once (its own backoff has not started).
    let second = connects(&outs);
    assert_eq!(second.len(), 1, "{outs:?}");
    assert_eq!(second[0].1, "10.0.0.2:9092");
    assert_ne!(second[0].0, conn);
    assert_eq!(p.connections().collect::<Vec<_>>(), vec![second[0].0]);
    // The earliest deadline now is the first server's reconnect backoff (50 ms).
    assert_eq!(until, Some(t0 + Duration::from_millis(3050)));

    // A late report for the timed-out one is ignored: no ApiVersions goes out.
    p.handle_connected(t0 + Duration::from_secs(3), conn);
    let (outs, _) = drain(&mut p);
    assert!(
        !outs.iter().any(|o| matches!(o, Output::Transmit { .. })),
        "{outs:?}"
    );
    // The second connect has a deadline of its own.
    p.handle_timeout(t0 + Duration::from_secs(6));
    let (outs, _) = drain(&mut p);
    assert!(
        outs.contains(&Output::Close {
            conn: second[0].0,
            flush: false
        }),
        "{outs:?}"
    );
    assert_eq!(p.pending_records(), 1, "the record still waits");
}

#[test]
fn a_connect_answered_in_time_is_not_timed_out() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into()],
        connect_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let (outs, _) = drain(&mut p);
    let conn = connects(&outs)[0].0;
    p.handle_connected(t0 + Duration::from_secs(1), conn);
    let (_, until) = drain(&mut p);
    // ApiVersions is in flight: the next deadline is its request timeout, not the connect one.
    assert_eq!(
        until,
        Some(t0 + Duration::from_secs(1) + Duration::from_secs(30))
    );
    p.handle_timeout(t0 + Duration::from_secs(5));
    let (outs, _) = drain(&mut p);
    assert!(
        !(outs.iter()).any(|o| matches!(o, Output::Close { conn: c, .. } if *c == conn)),
        "{outs:?}"
    );
    assert_eq!(p.connections().collect::<Vec<_>>(), vec![conn]);
}

#[test]
fn a_zero_connect_timeout_is_refused() {
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into()],
        connect_timeout: Duration::ZERO,
        ..Default::default()
    };
    let e = Producer::new(cfg, Instant::now()).unwrap_err();
    assert!(
        e.to_string().contains("socket.connection.setup.timeout.ms"),
        "{e}"
    );
}

/// Review finding (2026-12-05): `bootstrap.patience` applied only to a bootstrap server that
/// took the connection and did not answer its ApiVersions; one that dropped the connect (a
/// firewall, a blackholed address) held every start of the producer for the whole connect
/// timeout before the next server was tried. Now the next one is tried alongside after the
/// patience in both cases.
#[test]
fn a_bootstrap_server_that_drops_the_connect_is_waited_for_only_the_patience() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into(), "10.0.0.2:9092".into()],
        connect_timeout: Duration::from_secs(10),
        bootstrap_patience: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let (outs, until) = drain(&mut p);
    let first = connects(&outs);
    assert_eq!(first.len(), 1, "{outs:?}");
    assert_eq!(first[0].1, "10.0.0.1:9092");
    assert_eq!(
        until,
        Some(t0 + Duration::from_secs(1)),
        "the patience is the wait"
    );
    p.handle_timeout(t0 + Duration::from_millis(999));
    assert!(connects(&drain(&mut p).0).is_empty());
    p.handle_timeout(t0 + Duration::from_secs(1));
    let (outs, _) = drain(&mut p);
    let second = connects(&outs);
    assert_eq!(second.len(), 1, "{outs:?}");
    assert_eq!(second[0].1, "10.0.0.2:9092");
    // The first connect is still waited for, to its own deadline.
    assert_eq!(p.connections().count(), 2);
}

/// Review finding (2026-12-05): a plaintext producer pointed at a TLS listener, or at an HTTP
/// server, closed the connection as "bad frame size" and said nothing more, until its
/// records failed at their delivery timeout. The reason now says what the bytes look like,
/// also where `max_frame_size` is large enough (above 336 MiB) that a TLS alert's first four
/// bytes read as a legal size (before, the connection then waited for 336 MiB that never
/// came, until the request timeout).
#[test]
fn a_tls_listener_or_an_http_server_is_named_when_its_answer_is_not_kafka() {
    use bytes::BytesMut;
    for (answer, expect, max_frame_size) in [
        (
            &[0x15u8, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28][..],
            "speaks TLS",
            None,
        ),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "HTTP server", None),
        (&[0x7f, 0xff, 0xff, 0xff, 0x00][..], "bad frame size", None),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "bad frame size", None),
        (&[0x80, 0x00, 0x00, 0x01, 0x00][..], "bad frame size", None),
        (
            &[0x00, 0x20, 0x00, 0x00, 0x00][..],
            "larger than receive.message.max.bytes",
            Some(1 << 20),
        ),
        (
            &[0x15u8, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28][..],
            "speaks TLS",
            Some(1usize << 31),
        ),
        (
            b"HTTP/1.1 400 Bad Request\r\n\r\n",
            "HTTP server",
            Some(1usize << 31),
        ),
    ] {
        let t0 = Instant::now();
        let defaults = ProducerConfig::default();
        let cfg = ProducerConfig {
            bootstrap_servers: vec!["10.0.0.1:9093".into()],
            max_frame_size: max_frame_size.unwrap_or(defaults.max_frame_size),
            ..defaults
        };
        let mut p = Producer::new(cfg, t0).unwrap();
        p.send(t0, Record::new("t", "v")).unwrap();
        let (outs, _) = drain(&mut p);
        let conn = connects(&outs)[0].0;
        p.handle_connected(t0, conn);
        drain(&mut p);
        p.handle_read(t0, conn, &mut BytesMut::from(answer));
        let (outs, _) = drain(&mut p);
        let reason = outs.iter().find_map(|o| match o {
            Output::Event(Event::Diagnostic(Diagnostic::Disconnected {
                conn: c, reason, ..
            })) if *c == conn => Some(*reason),
            _ => None,
        });
        // "bad frame size" alone: nothing more is said (not "larger than" the cap).
        assert!(
            reason
                .is_some_and(|r| r.contains(expect) && (expect != "bad frame size" || r == expect)),
            "{expect} (max_frame_size {max_frame_size:?}): {reason:?}"
        );
        assert!(
            outs.contains(&Output::Close { conn, flush: false }),
            "{outs:?}"
        );
    }
}

/// The connect deadlines of `p`'s successive connects to its one bootstrap server, each
/// left unanswered to its deadline, from `t0`.
fn unanswered_connect_timeouts(mut cfg: ProducerConfig, rounds: usize) -> Vec<Duration> {
    // The record waits for metadata (so that the producer keeps connecting) for its whole
    // delivery timeout, not only `max.block.ms`.
    cfg.max_block = cfg.delivery_timeout;
    let t0 = Instant::now();
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let (mut outs, mut until) = drain(&mut p);
    let mut now = t0;
    let mut timeouts = Vec::new();
    while timeouts.len() < rounds {
        match connects(&outs).first() {
            Some(&(conn, _)) => {
                let deadline = until.expect("a connect deadline");
                timeouts.push(deadline - now);
                now = deadline;
                p.handle_timeout(now);
                (outs, until) = drain(&mut p);
                assert!(
                    outs.contains(&Output::Close { conn, flush: false }),
                    "{outs:?}"
                );
            }
            None => {
                // The reconnect backoff: the next connect at its end.
                now = until.expect("a reconnect backoff");
                p.handle_timeout(now);
                (outs, until) = drain(&mut p);
            }
        }
    }
    timeouts
}

/// Review finding (2026-12-05): `socket.connection.setup.timeout.max.ms` was accepted and
/// did nothing: every connect waited `socket.connection.setup.timeout.ms`, so a broker whose
/// TCP and TLS setup takes longer than that (10 s; a distant or overloaded one) was never
/// reached, and every record waited out its delivery timeout, where the Java client doubles
/// the timeout after each failed connect up to the maximum (KIP-601) and gets through.
#[test]
fn a_connect_that_timed_out_gives_the_next_one_longer_up_to_the_maximum() {
    let cfg = |max: Option<Duration>| ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into()],
        connect_timeout: Duration::from_secs(3),
        connect_timeout_max: max,
        backoff_jitter_percent: 0,
        ..Default::default()
    };
    let s = Duration::from_secs;
    assert_eq!(
        unanswered_connect_timeouts(cfg(Some(s(20))), 5),
        [s(3), s(6), s(12), s(20), s(20)]
    );
    // No maximum, or one at or below the timeout: the timeout every time.
    for max in [None, Some(s(3)), Some(s(1))] {
        assert_eq!(
            unanswered_connect_timeouts(cfg(max), 3),
            [s(3); 3],
            "{max:?}"
        );
    }
    // The Java client's defaults: 10 s, then doubling to 30 s.
    let java = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into()],
        backoff_jitter_percent: 0,
        ..Default::default()
    };
    assert_eq!(
        unanswered_connect_timeouts(java, 4),
        [s(10), s(20), s(30), s(30)]
    );
    // Spread as the backoffs are (20 %), never above the maximum.
    let spread = unanswered_connect_timeouts(
        ProducerConfig {
            backoff_jitter_percent: 20,
            ..cfg(Some(s(20)))
        },
        5,
    );
    assert_eq!(
        spread[0],
        s(3),
        "the first connect waits the timeout exactly"
    );
    for (t, nominal) in spread[1..].iter().zip([6.0, 12.0, 20.0, 20.0]) {
        let t = t.as_secs_f64();
        assert!(
            t >= nominal * 0.8 && t <= (nominal * 1.2f64).min(20.0),
            "{spread:?}"
        );
    }
}

/// Review finding (2026-12-05): `reconnect.backoff.max.ms` was refused unless equal to
/// `retry.backoff.max.ms` (a common Java tuning, 10 s, stopped the producer from starting);
/// it is its own cap now, apart from the retry backoff's.
#[test]
fn the_reconnect_backoff_doubles_to_its_own_maximum() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["10.0.0.1:9092".into()],
        reconnect_backoff: Duration::from_millis(100),
        reconnect_backoff_max: Some(Duration::from_millis(500)),
        retry_backoff_max: Duration::from_secs(10),
        backoff_jitter_percent: 0,
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let (outs, _) = drain(&mut p);
    let mut conn = connects(&outs)[0].0;
    let mut now = t0;
    let mut waits = Vec::new();
    for _ in 0..6 {
        p.handle_connect_failed(now, conn);
        let (outs, until) = drain(&mut p);
        assert!(connects(&outs).is_empty(), "{outs:?}");
        let at = until.expect("a reconnect backoff");
        waits.push(at - now);
        now = at;
        p.handle_timeout(now);
        conn = connects(&drain(&mut p).0)[0].0;
    }
    let ms = Duration::from_millis;
    assert_eq!(
        waits,
        [ms(100), ms(200), ms(400), ms(500), ms(500), ms(500)]
    );
}

/// A review of the settings against the Java client's (2026-12-07): a record waits for its
/// topic's metadata at most `max.block.ms`, as Java's `send` blocks in `waitOnMetadata`,
/// whatever holds the answer back. Before, only a topic said missing was held to it: with
/// every connect refused, a record waited its whole delivery timeout (120 s here), so a
/// `max.block.ms` of 5 s set to fail fast did not.
#[test]
fn a_record_waits_for_metadata_at_most_max_block_ms() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["a:9093".into()],
        max_block: Duration::from_secs(5),
        delivery_timeout: Duration::from_secs(120),
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let mut now = t0;
    let mut failed = None;
    for _ in 0..1000 {
        let (outs, until) = drain(&mut p);
        for (conn, _) in connects(&outs) {
            p.handle_connect_failed(now, conn);
        }
        failed = outs.iter().find_map(|o| match o {
            Output::Event(Event::Failed { error, .. }) => Some((now - t0, error.clone())),
            _ => None,
        });
        if failed.is_some() {
            break;
        }
        now = until.map_or(now + Duration::from_millis(10), |u| u.max(now));
        p.handle_timeout(now);
    }
    let (after, error) = failed.expect("the record failed");
    assert_eq!(
        after,
        Duration::from_secs(5),
        "failed after {after:?}: {error:?}"
    );
    assert_eq!(
        error,
        kprod_core::DeliveryError::DeliveryTimeout {
            last_error: Some(kprod_core::protocol::ErrorCode::NetworkException)
        }
    );
    assert_eq!(p.pending_records(), 0);
}
