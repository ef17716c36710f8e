//! A connection the driver's transport refused for good (a TLS certificate rejected by
//! either side, `Producer::handle_connection_refused`): before the cluster was reached it is
//! the configuration speaking, and once every bootstrap server has refused or failed to
//! connect the producer stops; after, only that connection fails.

mod harness;

use std::time::{Duration, Instant};

use harness::{Harness, TOPIC};
use kprod_core::{ConnId, Diagnostic, Event, FatalError, Output, Producer, ProducerConfig, Record};

fn drain(p: &mut Producer) -> Vec<Output> {
    let mut outs = Vec::new();
    loop {
        match p.poll_output() {
            Output::Wait { .. } => return outs,
            o => outs.push(o),
        }
    }
}

fn connects(outs: &[Output]) -> Vec<ConnId> {
    (outs.iter())
        .filter_map(|o| match o {
            Output::Connect { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect()
}

fn fatal(outs: &[Output]) -> Option<FatalError> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::Fatal(e)) => Some(e.clone()),
        _ => None,
    })
}

#[test]
fn refused_by_every_bootstrap_server_before_the_cluster_was_reached_stops_the_producer() {
    let t0 = Instant::now();
    let cfg = ProducerConfig {
        bootstrap_servers: vec!["a:9093".into(), "b:9093".into()],
        bootstrap_patience: None,
        ..Default::default()
    };
    let mut p = Producer::new(cfg, t0).unwrap();
    p.send(t0, Record::new("t", "v")).unwrap();
    let first = connects(&drain(&mut p))[0];
    p.handle_connection_refused(t0, first, "TLS: certificate expired".into());
    let outs = drain(&mut p);
    assert_eq!(fatal(&outs), None, "b is still to be tried: {outs:?}");
    let second = connects(&outs);
    assert_eq!(second.len(), 1, "{outs:?}");
    p.handle_connect_failed(t0, second[0]);
    let outs = drain(&mut p);
    assert_eq!(
        fatal(&outs),
        Some(FatalError::Refused {
            addr: "a:9093".into(),
            reason: "TLS: certificate expired".into()
        }),
        "{outs:?}"
    );
    assert!(
        (outs.iter()).any(|o| matches!(o, Output::Event(Event::Failed { .. }))),
        "the record fails with it: {outs:?}"
    );
    assert_eq!(p.pending_records(), 0);
}

#[test]
fn refused_after_the_cluster_was_reached_fails_only_that_connection() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, Record::new(TOPIC, "a")).unwrap();
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "a delivered");
    let conn = h.conn.expect("connected");
    h.events.clear();
    h.p.handle_connection_refused(h.now, conn, "TLS: unknown issuer".into());
    h.drain();
    assert!(
        (h.events.iter()).any(|e| matches!(
            e,
            Event::Diagnostic(Diagnostic::HandshakeFailed { conn: c, error: FatalError::Refused { .. }, .. })
                if *c == conn
        )),
        "{:?}",
        h.events
    );
    assert!(
        !(h.events.iter()).any(|e| matches!(e, Event::Fatal(_))),
        "{:?}",
        h.events
    );
    assert!(p_is_running(&h.p));
    // The next record goes once a connection is back (after the reconnect backoff).
    h.p.send(h.now, Record::new(TOPIC, "b")).unwrap();
    h.now += Duration::from_secs(2);
    h.p.handle_timeout(h.now);
    h.answer_all();
    assert_eq!(h.p.pending_records(), 0, "b delivered");
}

fn p_is_running(p: &Producer) -> bool {
    p.fatal_error().is_none() && !p.is_closed()
}
