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
            Output::Event(Event::Diagnostic(Diagnostic::Disconnected { conn: c, reason }))
                if *c == conn =>
            {
                Some(*reason)
            }
            _ => None,
        });
        assert!(
            reason.is_some_and(|r| r.contains(expect)),
            "{expect} (max_frame_size {max_frame_size:?}): {reason:?}"
        );
        assert!(
            outs.contains(&Output::Close { conn, flush: false }),
            "{outs:?}"
        );
    }
}
