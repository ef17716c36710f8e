//! `Event::Failed` hands the record back, on every route a record can fail by: waiting for
//! metadata, in an open (unsealed) batch, in a sealed batch, compressed, after a split, and
//! on the fatal path (a fatal broker error and the driver's `abort`). The real `Producer`
//! driven by hand with a minimal in-process responder.

#[path = "../benches/support/mod.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use kprod_core::protocol::{api_key, encode_response, ErrorCode, Message, Reader};
use kprod_core::{
    Compression, CompressionType, ConnId, DeliveryError, Event, FatalError, Output, Persistence,
    Producer, ProducerConfig, Record, RecordId,
};
use support::{respond, TOPIC};

struct Harness {
    p: Producer,
    now: Instant,
    conn: Option<ConnId>,
    partial: BytesMut,
    events: Vec<Event>,
    next_offset: i64,
}

impl Harness {
    fn new(tune: impl FnOnce(&mut ProducerConfig)) -> Self {
        let now = Instant::now();
        let mut cfg = ProducerConfig {
            bootstrap_servers: vec!["bench:9092".into()],
            linger: Duration::ZERO,
            ..ProducerConfig::default()
        };
        tune(&mut cfg);
        Self {
            p: Producer::new(cfg, now).unwrap(),
            now,
            conn: None,
            partial: BytesMut::new(),
            events: Vec::new(),
            next_offset: 0,
        }
    }

    fn drain(&mut self) {
        loop {
            match self.p.poll_output() {
                Output::Wait { .. } => return,
                Output::Connect { conn, .. } => {
                    self.conn = Some(conn);
                    self.partial.clear();
                    self.p.handle_connected(self.now, conn);
                }
                Output::Transmit { bytes, .. } => self.partial.extend_from_slice(&bytes),
                Output::Close { .. } => self.conn = None,
                Output::Event(e) => self.events.push(e),
                Output::SaslInput { .. } => unreachable!("no SASL here"),
            }
        }
    }

    fn next_frame(&mut self) -> Option<Bytes> {
        if self.partial.len() < 4 {
            return None;
        }
        let len = 4 + i32::from_be_bytes(self.partial[..4].try_into().unwrap()) as usize;
        (self.partial.len() >= len).then(|| self.partial.split_to(len).freeze())
    }

    fn feed(&mut self, answer: Bytes) {
        let conn = self.conn.expect("connected");
        let mut buf = BytesMut::from(&answer[..]);
        self.p.handle_read(self.now, conn, &mut buf);
        self.drain();
    }

    /// Answers every request healthily except Produce and the APIs in `skip`; returns the
    /// first Produce request, if one was written.
    fn answer_until_produce(&mut self, skip: &[i16]) -> Option<Bytes> {
        self.drain();
        while let Some(f) = self.next_frame() {
            let key = api_of(&f).0;
            if key == api_key::PRODUCE {
                return Some(f);
            }
            if skip.contains(&key) {
                continue;
            }
            let a = respond(&f, &mut self.next_offset);
            self.feed(a);
        }
        None
    }

    /// `(id, error, persisted, record)` of every `Failed` event, in order.
    fn failures(&self) -> Vec<(RecordId, DeliveryError, Persistence, Record)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Failed {
                    id,
                    error,
                    persisted,
                    record,
                } => Some((
                    *id,
                    error.clone(),
                    *persisted,
                    *record.clone().expect("the record is handed back"),
                )),
                _ => None,
            })
            .collect()
    }
}

fn api_of(frame: &[u8]) -> (i16, i16, i32) {
    let mut r = Reader::new(Bytes::copy_from_slice(&frame[4..]));
    (r.i16().unwrap(), r.i16().unwrap(), r.i32().unwrap())
}

/// A Produce answer with `code` for every partition of the request `frame`.
fn produce_error(frame: &Bytes, code: ErrorCode) -> Bytes {
    let (key, version, corr) = api_of(frame);
    assert_eq!(key, api_key::PRODUCE);
    let mut r = Reader::new(frame.slice(4..));
    kprod_core::protocol::RequestHeader::decode(2, &mut r).unwrap();
    let req = ProduceRequest::decode_exact(version, Bytes::copy_from_slice(r.peek_rest())).unwrap();
    let resp = ProduceResponse {
        responses: req
            .topic_data
            .iter()
            .map(|t| TopicProduceResponse {
                name: t.name.clone(),
                partition_responses: t
                    .partition_data
                    .iter()
                    .map(|p| PartitionProduceResponse {
                        index: p.index,
                        error_code: code.as_i16(),
                        base_offset: -1,
                        log_append_time_ms: -1,
                        log_start_offset: 0,
                        record_errors: vec![],
                        error_message: None,
                        current_leader: None,
                    })
                    .collect(),
            })
            .collect(),
        throttle_time_ms: 0,
        node_endpoints: vec![],
    };
    encode_response::<ProduceRequest>(&resp, version, corr)
}

/// Record `i`: a key (or none), a value, headers (one with a null value) and a timestamp
/// that goes back once, so that negative timestamp deltas come back too.
fn record(i: usize) -> Record {
    let mut r = Record::new(TOPIC, format!("value {i} {}", "v".repeat(40)))
        .with_timestamp(1_700_000_000_000 + (i as i64 % 3) * 7 - 5)
        .with_header("trace", Some(Bytes::from(format!("t{i}"))))
        .with_header("empty", None);
    if i & 1 == 0 {
        r = r.with_key(format!("key-{i}"));
    }
    r
}

/// What a record in a partition's batch comes back as: as sent, with its partition.
fn assigned(mut r: Record) -> Record {
    r.partition = Some(0);
    r
}

fn send_all(h: &mut Harness, n: usize) -> Vec<RecordId> {
    (0..n)
        .map(|i| h.p.send(h.now, record(i)).expect("accepted"))
        .collect()
}

/// Every record comes back once, in id order, equal to what was sent (as `expect` maps it).
fn assert_returned(h: &Harness, ids: &[RecordId], expect: impl Fn(Record) -> Record) {
    let failures = h.failures();
    assert_eq!(failures.len(), ids.len(), "{:?}", h.events);
    for (i, (id, _, _, r)) in failures.iter().enumerate() {
        assert_eq!(*id, ids[i]);
        assert_eq!(*r, expect(record(i)), "record {i}");
    }
}

#[test]
fn records_waiting_for_metadata_come_back_as_sent() {
    let mut h = Harness::new(|c| {
        c.delivery_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(1);
    });
    let ids = send_all(&mut h, 3);
    h.drain(); // nothing is ever answered
    h.now += Duration::from_secs(3);
    h.p.handle_timeout(h.now);
    h.drain();
    // Never assigned a partition: the record comes back exactly as the application sent it.
    assert_returned(&h, &ids, |r| r);
    for (_, e, p, _) in h.failures() {
        assert_eq!(
            (e, p),
            (DeliveryError::DeliveryTimeout, Persistence::NotPersisted)
        );
    }
}

#[test]
fn a_record_for_a_partition_that_does_not_exist_comes_back() {
    let mut h = Harness::new(|_| {});
    let sent = record(0).with_partition(9);
    let id = h.p.send(h.now, sent.clone()).unwrap();
    h.answer_until_produce(&[]);
    assert_eq!(
        h.failures(),
        vec![(
            id,
            DeliveryError::UnknownPartition,
            Persistence::NotPersisted,
            sent
        )]
    );
}

#[test]
fn records_in_an_open_batch_come_back_when_the_driver_aborts() {
    // A batch is sealed at its first transmission, after linger.ms.
    let mut h = Harness::new(|c| c.linger = Duration::from_secs(10));
    let ids = send_all(&mut h, 5);
    let produce = h.answer_until_produce(&[]);
    assert!(produce.is_none(), "lingering");
    assert_eq!(h.p.pending_records(), 5);
    h.events.clear();
    h.p.abort(h.now, "certificate rejected");
    h.drain();
    assert_eq!(
        h.events.first(),
        Some(&Event::Fatal(FatalError::Aborted {
            reason: "certificate rejected".into()
        }))
    );
    assert_returned(&h, &ids, assigned);
    for (_, e, p, _) in h.failures() {
        assert!(matches!(
            e,
            DeliveryError::Fatal(FatalError::Aborted { .. })
        ));
        assert_eq!(p, Persistence::NotPersisted, "never sent");
    }
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(h.p.buffered_bytes(), 0);
}

/// A sealed batch refused by the broker: its records are decoded from the batch's bytes, with
/// every codec compiled in (none, and gzip, snappy, lz4, zstd with their features).
#[test]
fn records_of_a_sealed_batch_come_back_with_every_codec() {
    let mut tried = 0;
    for codec in CompressionType::ALL {
        if !codec.is_available() {
            continue;
        }
        tried += 1;
        let mut h = Harness::new(|c| c.compression = Compression::new(codec));
        let ids = send_all(&mut h, 20);
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, ErrorCode::InvalidRecord));
        assert_returned(&h, &ids, assigned);
        for (_, e, p, _) in h.failures() {
            assert_eq!(
                (e, p),
                (
                    DeliveryError::Broker(ErrorCode::InvalidRecord),
                    Persistence::NotPersisted
                ),
                "{codec}"
            );
        }
        assert_eq!(h.p.buffered_bytes(), 0, "{codec}");
    }
    assert!(tried >= 1);
}

/// MESSAGE_TOO_LARGE splits the batch in two re-encoded (and re-compressed) halves; when the
/// halves fail, their records still come back as sent.
#[test]
fn records_come_back_after_a_split() {
    for codec in [CompressionType::None, CompressionType::Zstd] {
        if !codec.is_available() {
            continue;
        }
        let mut h = Harness::new(|c| c.compression = Compression::new(codec));
        let ids = send_all(&mut h, 8);
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, ErrorCode::MessageTooLarge));
        assert!(h.failures().is_empty(), "split, not failed: {:?}", h.events);
        let mut halves = 0;
        while let Some(f) = h.answer_until_produce(&[]) {
            halves += 1;
            h.feed(produce_error(&f, ErrorCode::InvalidRecord));
        }
        assert_eq!(halves, 2, "{codec}");
        assert_returned(&h, &ids, assigned);
    }
}

/// A fatal broker error fails the batch in flight (decoded from its sealed bytes) and the
/// records still in an open batch behind it (decoded from the builder).
#[test]
fn records_come_back_on_the_fatal_path() {
    let mut h = Harness::new(|c| c.max_in_flight = 1);
    let first = send_all(&mut h, 3);
    let f = h.answer_until_produce(&[]).expect("a Produce request");
    // More records while the first batch is in flight: a second batch, not sent yet.
    let more: Vec<RecordId> = (3..6)
        .map(|i| h.p.send(h.now, record(i)).unwrap())
        .collect();
    h.drain();
    assert!(h.next_frame().is_none(), "one batch in flight at a time");
    h.feed(produce_error(&f, ErrorCode::ClusterAuthorizationFailed));
    let ids: Vec<RecordId> = first.into_iter().chain(more).collect();
    assert_returned(&h, &ids, assigned);
    let failures = h.failures();
    assert!(failures
        .iter()
        .all(|(_, e, _, _)| matches!(e, DeliveryError::Fatal(_))));
    assert_eq!(
        failures.iter().map(|f| f.2).collect::<Vec<_>>(),
        [
            vec![Persistence::NotPersisted; 3], // refused for good
            vec![Persistence::NotPersisted; 3], // never sent
        ]
        .concat()
    );
}

/// The driver's `abort` with a batch in flight: its records may be in the log, and come back.
#[test]
fn an_abort_with_a_batch_in_flight_returns_its_records_possibly_persisted() {
    let mut h = Harness::new(|_| {});
    let ids = send_all(&mut h, 4);
    h.answer_until_produce(&[]).expect("a Produce request");
    h.p.abort(h.now, "gone");
    h.drain();
    assert_returned(&h, &ids, assigned);
    assert!(h
        .failures()
        .iter()
        .all(|f| f.2 == Persistence::PossiblyPersisted));
    // Later records are refused and handed back too.
    let refused = h.p.send(h.now, record(9)).unwrap_err();
    assert_eq!(refused.record(), &record(9));
}
