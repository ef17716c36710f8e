//! What the core's hand-driven tests share: the real `Producer` driven by hand against the
//! benches' minimal in-process responder, and hand-made Produce error answers.

#![allow(dead_code)]

#[path = "../../benches/support/mod.rs"]
pub mod support;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use kprod_core::protocol::{api_key, encode_response, ErrorCode, Message, Reader};
use kprod_core::{ConnId, Event, Output, Producer, ProducerConfig, RecordId};
// Not every test file uses each.
#[allow(unused_imports)]
pub use support::{api_versions_answer, parse_request, partition_answer, respond, TOPIC};

/// Every record the `Delivered` events among `events` name: its id, partition and offset, in
/// the order of the events.
pub fn deliveries(events: &[Event]) -> Vec<(RecordId, i32, Option<i64>)> {
    (events.iter())
        .filter_map(|e| match e {
            Event::Delivered(d) => Some(d.records().map(|(id, o)| (id, d.partition, o))),
            _ => None,
        })
        .flatten()
        .collect()
}

/// One producer, one connection at a time, every event kept.
pub struct Harness {
    pub p: Producer,
    pub now: Instant,
    pub conn: Option<ConnId>,
    pub partial: BytesMut,
    pub events: Vec<Event>,
    pub next_offset: i64,
    /// The bytes transmitted on the current connection so far.
    pub sent: u64,
}

impl Harness {
    /// A producer bootstrapping from `bench:9092` with no linger, tuned by `tune`.
    pub fn new(tune: impl FnOnce(&mut ProducerConfig)) -> Self {
        let now = Instant::now();
        let mut cfg = ProducerConfig {
            bootstrap_servers: vec!["bench:9092".into()],
            linger: Duration::ZERO,
            // Backoffs to the millisecond, as the tests built on the harness check them
            // (tests/jitter.rs checks the spread).
            backoff_jitter_percent: 0,
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
            sent: 0,
        }
    }

    /// Carries out every output until the producer waits: connects succeed at once.
    pub fn drain(&mut self) {
        loop {
            match self.p.poll_output() {
                Output::Wait { .. } => return,
                Output::Connect { conn, .. } => {
                    self.conn = Some(conn);
                    self.partial.clear();
                    self.sent = 0;
                    self.p.handle_connected(self.now, conn);
                }
                Output::Transmit { bytes, .. } => {
                    self.sent += bytes.len() as u64;
                    self.partial.extend_from_slice(&bytes);
                }
                Output::Close { .. } => self.conn = None,
                Output::Event(e) => self.events.push(e),
                Output::SaslInput { .. } => unreachable!("no SASL here"),
            }
        }
    }

    /// The next whole request frame written, if any.
    pub fn next_frame(&mut self) -> Option<Bytes> {
        if self.partial.len() < 4 {
            return None;
        }
        let len = 4 + i32::from_be_bytes(self.partial[..4].try_into().unwrap()) as usize;
        (self.partial.len() >= len).then(|| self.partial.split_to(len).freeze())
    }

    /// Hands `answer` to the producer on the current connection, then drains.
    pub fn feed(&mut self, answer: Bytes) {
        let conn = self.conn.expect("connected");
        let mut buf = BytesMut::from(&answer[..]);
        self.p.handle_read(self.now, conn, &mut buf);
        self.drain();
    }

    /// Closes the bootstrap connection (the first one), so that every request, metadata
    /// included, goes on the leader's: the one connection the harness answers on.
    pub fn drop_bootstrap_connection(&mut self) {
        self.p.handle_disconnected(self.now, ConnId(0));
        self.drain();
    }

    /// Answers every request healthily until nothing is left to answer.
    pub fn answer_all(&mut self) {
        self.drain();
        while let Some(f) = self.next_frame() {
            let a = respond(&f, &mut self.next_offset);
            self.feed(a);
        }
    }

    /// Answers every request healthily except Produce and the APIs in `skip`; returns the
    /// first Produce request, if one was written.
    pub fn answer_until_produce(&mut self, skip: &[i16]) -> Option<Bytes> {
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
}

/// Api key, version and correlation id of a request frame.
pub fn api_of(frame: &[u8]) -> (i16, i16, i32) {
    let mut r = Reader::new(Bytes::copy_from_slice(&frame[4..]));
    (r.i16().unwrap(), r.i16().unwrap(), r.i32().unwrap())
}

/// The Produce request in `frame`, any version (asserting it is one).
pub fn produce_of(frame: &Bytes) -> ProduceRequest {
    let (key, version, _, body) = parse_request(frame);
    assert_eq!(key, api_key::PRODUCE);
    ProduceRequest::decode_exact(version, body).unwrap()
}

/// (producer epoch, base sequence) of the first batch in a Produce request.
pub fn epoch_and_sequence(frame: &Bytes) -> (i16, i32) {
    let req = produce_of(frame);
    let records = req.topic_data[0].partition_data[0].records.clone().unwrap();
    (
        i16::from_be_bytes(records[51..53].try_into().unwrap()),
        i32::from_be_bytes(records[53..57].try_into().unwrap()),
    )
}

/// A Produce answer with `code` for every partition of the request `frame` (the log
/// starting at 0).
/// A healthy answer to the Produce request `f` (at offsets from `off`), rewritten by `edit`.
pub fn produce_rewrite(f: &Bytes, off: &mut i64, edit: impl FnOnce(&mut ProduceResponse)) -> Bytes {
    let (_, version, corr) = api_of(f);
    let a = respond(f, off);
    let (_, mut r) =
        kprod_core::protocol::decode_response::<ProduceRequest>(version, a.slice(4..)).unwrap();
    edit(&mut r);
    encode_response::<ProduceRequest>(&r, version, corr)
}

pub fn produce_error(frame: &Bytes, code: ErrorCode) -> Bytes {
    produce_error_with_log_start(frame, code, 0)
}

/// [`produce_error`] with the log starting at `log_start` (-1: the broker does not know it).
pub fn produce_error_with_log_start(frame: &Bytes, code: ErrorCode, log_start: i64) -> Bytes {
    let (_, version, corr) = api_of(frame);
    let req = produce_of(frame);
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
                        log_start_offset: log_start,
                        ..partition_answer(p.index, code.as_i16(), -1)
                    })
                    .collect(),
            })
            .collect(),
        throttle_time_ms: 0,
        node_endpoints: vec![],
    };
    encode_response::<ProduceRequest>(&resp, version, corr)
}
