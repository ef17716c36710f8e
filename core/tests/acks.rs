//! `acks` 0 and 1 with `enable.idempotence=false`: the real `Producer` driven by hand against
//! the minimal in-process responder of the benches.

mod harness;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use harness::{api_of, deliveries, produce_error, produce_of, respond, TOPIC};
use kprod_core::protocol::record_batch::BatchHeader;
use kprod_core::protocol::{api_key, ErrorCode};
use kprod_core::{
    ConnId, Delivered, DeliveryError, Diagnostic, Event, Output, Persistence, Producer,
    ProducerConfig, Record, RecordId,
};

struct Harness {
    p: Producer,
    now: Instant,
    conn: Option<ConnId>,
    partial: BytesMut,
    outputs: Vec<Output>,
    next_offset: i64,
    /// Every request frame taken off the wire, in order.
    requests: Vec<Bytes>,
}

impl Harness {
    fn new(acks: i16) -> Self {
        let now = Instant::now();
        let cfg = ProducerConfig {
            bootstrap_servers: vec!["bench:9092".into()],
            linger: Duration::ZERO,
            enable_idempotence: false,
            acks,
            request_timeout: Duration::from_secs(1),
            delivery_timeout: Duration::from_secs(1),
            ..ProducerConfig::default()
        };
        Self {
            p: Producer::new(cfg, now).unwrap(),
            now,
            conn: None,
            partial: BytesMut::new(),
            outputs: Vec::new(),
            next_offset: 0,
            requests: Vec::new(),
        }
    }

    fn drain(&mut self) {
        loop {
            match self.p.poll_output() {
                Output::Wait { .. } => return,
                Output::Connect { conn, addr } => {
                    self.outputs.push(Output::Connect { conn, addr });
                    self.conn = Some(conn);
                    self.partial.clear();
                    self.p.handle_connected(self.now, conn);
                }
                Output::Transmit { conn, bytes } => {
                    self.partial.extend_from_slice(&bytes);
                    self.outputs.push(Output::Transmit { conn, bytes });
                }
                Output::Close { conn, flush } => {
                    self.conn = None;
                    self.outputs.push(Output::Close { conn, flush });
                }
                o => self.outputs.push(o),
            }
        }
    }

    fn next_frame(&mut self) -> Option<Bytes> {
        if self.partial.len() < 4 {
            return None;
        }
        let len = 4 + i32::from_be_bytes(self.partial[..4].try_into().unwrap()) as usize;
        let f = (self.partial.len() >= len).then(|| self.partial.split_to(len).freeze())?;
        self.requests.push(f.clone());
        Some(f)
    }

    fn feed(&mut self, answer: Bytes) {
        let conn = self.conn.expect("connected");
        let mut buf = BytesMut::from(&answer[..]);
        self.p.handle_read(self.now, conn, &mut buf);
        self.drain();
    }

    /// Answers every request a healthy broker would answer: under acks=0 no Produce request.
    fn answer_all(&mut self) {
        self.drain();
        while let Some(f) = self.next_frame() {
            if api_of(&f).0 == api_key::PRODUCE && produce_of(&f).acks == 0 {
                continue;
            }
            let a = respond(&f, &mut self.next_offset);
            self.feed(a);
        }
    }

    fn events(&self) -> Vec<Event> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(Event::Diagnostic(_)) => None,
                Output::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    fn closed_or_disconnected(&self) -> bool {
        self.outputs.iter().any(|o| {
            matches!(
                o,
                Output::Close { .. }
                    | Output::Event(Event::Diagnostic(Diagnostic::Disconnected { .. }))
            )
        })
    }
}

fn headers_of(frame: &Bytes) -> Vec<BatchHeader> {
    produce_of(frame)
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .map(|p| BatchHeader::peek(p.records.as_deref().unwrap()).unwrap())
        .collect()
}

fn record(v: &str) -> Record {
    Record::new(TOPIC, v.to_owned()).with_partition(0)
}

fn produce_frames(h: &Harness) -> Vec<Bytes> {
    h.requests
        .iter()
        .filter(|f| api_of(f).0 == api_key::PRODUCE)
        .cloned()
        .collect()
}

#[test]
fn acks_one_without_idempotence_sends_no_producer_id_and_no_sequence() {
    let mut h = Harness::new(1);
    for v in ["a", "b", "c"] {
        h.p.send(h.now, record(v)).unwrap();
        h.answer_all();
    }
    assert!(
        !h.requests
            .iter()
            .any(|f| api_of(f).0 == api_key::INIT_PRODUCER_ID),
        "no InitProducerId without idempotence"
    );
    assert_eq!(h.p.identity(), None);
    let produces = produce_frames(&h);
    assert_eq!(produces.len(), 3);
    for f in &produces {
        assert_eq!(produce_of(f).acks, 1);
        for b in headers_of(f) {
            assert_eq!(
                (b.producer_id, b.producer_epoch, b.base_sequence),
                (-1, -1, -1)
            );
        }
    }
    let events = h.events();
    assert!(
        events.iter().all(|e| matches!(e, Event::Delivered(_))),
        "{events:?}"
    );
    let offsets: Vec<Option<i64>> = deliveries(&events).iter().map(|d| d.2).collect();
    assert_eq!(offsets, vec![Some(0), Some(1), Some(2)]);
}

#[test]
fn acks_all_without_idempotence_is_allowed_and_carries_no_identity() {
    let mut h = Harness::new(-1);
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    let produces = produce_frames(&h);
    assert_eq!(produce_of(&produces[0]).acks, -1);
    let b = &headers_of(&produces[0])[0];
    assert_eq!((b.producer_id, b.base_sequence), (-1, -1));
    assert!(matches!(
        h.events()[..],
        [Event::Delivered(Delivered {
            base_offset: Some(0),
            ..
        })]
    ));
}

#[test]
fn acks_zero_requests_wait_for_nothing_and_end_as_sent() {
    let mut h = Harness::new(0);
    h.p.send(h.now, record("a")).unwrap();
    h.p.send(h.now, record("b")).unwrap();
    h.answer_all();
    let produces = produce_frames(&h);
    assert!(!produces.is_empty());
    for f in &produces {
        assert_eq!(produce_of(f).acks, 0);
        for b in headers_of(f) {
            assert_eq!(
                (b.producer_id, b.producer_epoch, b.base_sequence),
                (-1, -1, -1)
            );
        }
    }
    // Each record resolved as Sent, never Delivered, with nothing left pending.
    let events = h.events();
    let sent: Vec<RecordId> = (events.iter())
        .flat_map(|e| match e {
            Event::Sent(s) if s.partition == 0 => s.ids.clone(),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(sent.len(), 2, "{events:?}");
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(h.p.buffered_bytes(), 0);
    // A Sent event comes right after the bytes of its request.
    let first_sent = h
        .outputs
        .iter()
        .position(|o| matches!(o, Output::Event(Event::Sent(_))))
        .unwrap();
    assert!(matches!(h.outputs[first_sent - 1], Output::Transmit { .. }));
    // No answer is awaited: well past the request timeout, the connection stays open.
    h.now += Duration::from_secs(5);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(!h.closed_or_disconnected(), "{:?}", h.outputs);
    // And later records go out on it, again without waiting.
    let c = h.p.send(h.now, record("c")).unwrap();
    h.answer_all();
    assert_eq!(h.events().len(), events.len() + 1);
    assert!(matches!(h.events().last(), Some(Event::Sent(s)) if s.ids == [c]));
}

#[test]
fn an_answer_to_an_acks_zero_request_is_harmless() {
    let mut h = Harness::new(0);
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    let produce = produce_frames(&h).pop().expect("a produce request");
    // A broker that answers acks=0 anyway (Kafka never does).
    let answer = respond(&produce, &mut h.next_offset);
    h.feed(answer);
    assert!(!h.closed_or_disconnected(), "{:?}", h.outputs);
    assert_eq!(h.events().len(), 1, "no second outcome: {:?}", h.events());
    // The connection still works: the next record goes out on it.
    h.p.send(h.now, record("b")).unwrap();
    h.answer_all();
    assert!(!h.closed_or_disconnected(), "{:?}", h.outputs);
    assert_eq!(h.events().len(), 2);
    // A frame with a correlation id nobody used is still a protocol error.
    let mut bogus = respond(&produce, &mut h.next_offset).to_vec();
    bogus[4..8].copy_from_slice(&9999i32.to_be_bytes());
    h.feed(Bytes::from(bogus));
    assert!(h.closed_or_disconnected());
}

#[test]
fn sequence_errors_fail_the_batch_without_idempotence_and_the_partition_goes_on() {
    let mut h = Harness::new(1);
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    loop {
        let f = h.next_frame().expect("a request");
        if api_of(&f).0 == api_key::PRODUCE {
            h.feed(produce_error(&f, ErrorCode::OutOfOrderSequenceNumber));
            break;
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    h.p.send(h.now, record("b")).unwrap();
    h.answer_all();
    let events = h.events();
    assert!(
        matches!(
            &events[..],
            [
                Event::Failed {
                    error: DeliveryError::Broker(ErrorCode::OutOfOrderSequenceNumber),
                    persisted: Persistence::NotPersisted,
                    ..
                },
                Event::Delivered(Delivered {
                    base_offset: Some(0),
                    ..
                })
            ]
        ),
        "{events:?}"
    );
    assert!(!h
        .requests
        .iter()
        .any(|f| api_of(f).0 == api_key::INIT_PRODUCER_ID));
}

#[test]
fn an_acks_one_request_lost_in_flight_fails_possibly_persisted() {
    let mut h = Harness::new(1);
    h.p.send(h.now, record("a")).unwrap();
    h.drain();
    loop {
        let f = h.next_frame().expect("a request");
        if api_of(&f).0 == api_key::PRODUCE {
            break; // never answered
        }
        let a = respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    // The request timeout (1 s) closes the connection; the delivery timeout (1 s) ends it.
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.drain();
    assert!(h.closed_or_disconnected());
    assert!(
        matches!(
            h.events()[..],
            [Event::Failed {
                error: DeliveryError::DeliveryTimeout {
                    last_error: Some(ErrorCode::RequestTimedOut)
                },
                persisted: Persistence::PossiblyPersisted,
                ..
            }]
        ),
        "{:?}",
        h.events()
    );
}

/// acks=0: a close while a Metadata request is in flight (a periodic refresh) still closes
/// every connection in good order, so that the driver writes the `Sent` records' requests it
/// holds. (A close drops at once a connection awaiting a Produce answer, whose records were
/// reported at their delivery timeout; a Metadata request awaited does not count.)
#[test]
fn acks_zero_close_beside_a_metadata_request_in_flight_flushes() {
    let mut h = Harness::new(0);
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    assert!(h.events().iter().any(|e| matches!(e, Event::Sent(_))));
    // The periodic refresh goes out and is not answered.
    h.now += Duration::from_secs(301);
    h.p.handle_timeout(h.now);
    h.drain();
    let metadata = std::iter::from_fn(|| h.next_frame()).any(|f| api_of(&f).0 == api_key::METADATA);
    assert!(metadata, "a Metadata request in flight");
    h.p.close(h.now);
    h.drain();
    let closes: Vec<bool> = (h.outputs.iter())
        .filter_map(|o| match o {
            Output::Close { flush, .. } => Some(*flush),
            _ => None,
        })
        .collect();
    assert!(
        !closes.is_empty() && closes.iter().all(|f| *f),
        "{closes:?}"
    );
}
