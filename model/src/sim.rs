//! A deterministic in-memory harness: the real producer, the [`Cluster`] model, and a
//! network of FIFO links that tests can break, hold and delay. Time is virtual.
//!
//! It is quinn's `Pair` idea for Kafka: [`Sim::step`] does one round of work and
//! [`Sim::run`] drives until every record has resolved, jumping the clock to the producer's
//! next deadline when nothing else can happen.
//!
//! Every request the producer writes is decoded: [`Sim::transmitted`] records each Produce
//! batch, and the harness panics if a partition is ever in flight on two connections at once
//! (P7) or has more than `max_in_flight` unanswered batches (P4), as it does when a record
//! gets a second outcome.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::produce::ProduceRequest;
use kprod_core::protocol::record_batch::BatchHeader;
use kprod_core::protocol::{api_key, Message, Reader, Request, RequestHeader};
use kprod_core::{ConnId, Event, Output, Persistence, Producer, ProducerConfig, Record, RecordId};

use crate::broker::{split_frames, Cluster};

/// One connection between the producer and a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Link {
    /// Node at the far end.
    pub node: i32,
    /// Bytes the producer wrote that the broker has not read yet.
    pub to_broker: BytesMut,
    /// Response frames on their way to the producer.
    pub to_client: VecDeque<Bytes>,
    /// When set, the broker reads nothing on this link (a stalled broker).
    pub stalled: bool,
    /// When set, the broker processes requests but its responses are dropped.
    pub blackhole: bool,
    /// Requests written on this link whose response the producer has not read yet, oldest
    /// first, each with the partitions it carries (empty for requests other than Produce).
    pub outstanding: VecDeque<Vec<(String, i32)>>,
    /// The start of a request whose remaining chunks have not been transmitted yet.
    pub partial: BytesMut,
}

impl Link {
    fn new(node: i32) -> Self {
        Self {
            node,
            to_broker: BytesMut::new(),
            partial: BytesMut::new(),
            to_client: VecDeque::new(),
            stalled: false,
            blackhole: false,
            outstanding: VecDeque::new(),
        }
    }

    /// Unanswered Produce requests on this link.
    pub fn produce_outstanding(&self) -> usize {
        self.outstanding.iter().filter(|r| !r.is_empty()).count()
    }
}

/// A record batch the producer wrote, as the harness decoded it from the request bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WireBatch {
    /// Connection it was written to.
    pub conn: ConnId,
    /// Node at the far end.
    pub node: i32,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Producer id.
    pub producer_id: i64,
    /// Epoch.
    pub epoch: i16,
    /// Base sequence.
    pub base_sequence: i32,
    /// Number of records.
    pub count: i32,
}

/// The batch header of each (topic, partition) in a Produce request.
type RequestBatches = Vec<(String, i32, BatchHeader)>;

/// Decodes the Produce batches of one request frame (without its size prefix). Returns the
/// API key and, for Produce, each partition's batch header.
fn decode_request_batches(frame: Bytes) -> Option<(i16, RequestBatches)> {
    let mut r = Reader::new(frame.clone());
    let key = r.i16().ok()?;
    let version = r.i16().ok()?;
    if key != api_key::PRODUCE {
        return Some((key, Vec::new()));
    }
    let mut r = Reader::new(frame);
    RequestHeader::decode(ProduceRequest::request_header_version(version), &mut r).ok()?;
    let req = ProduceRequest::decode_exact(version, Bytes::copy_from_slice(r.peek_rest())).ok()?;
    let mut out = Vec::new();
    for t in req.topic_data {
        for p in t.partition_data {
            let h = BatchHeader::peek(p.records.as_deref().unwrap_or(&[])).ok()?;
            out.push((t.name.clone(), p.index, h));
        }
    }
    Some((key, out))
}

/// The final outcome of a record, as reported to the application.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Delivered at this offset (`None`: a duplicate acknowledged without one).
    Delivered {
        /// Partition.
        partition: i32,
        /// Offset.
        offset: Option<i64>,
    },
    /// Failed.
    Failed(Persistence),
}

/// The harness.
#[derive(Debug, Clone)]
pub struct Sim {
    /// The real producer.
    pub producer: Producer,
    /// The cluster model.
    pub cluster: Cluster,
    /// Open links.
    pub links: BTreeMap<ConnId, Link>,
    /// Virtual clock.
    pub now: Instant,
    /// Every event, in order.
    pub events: Vec<Event>,
    /// Final outcome per record; a second outcome for one record panics.
    pub outcomes: BTreeMap<RecordId, Outcome>,
    /// Records accepted, with their value.
    pub sent: Vec<(RecordId, Record)>,
    /// Nodes that refuse connections.
    pub refuse: BTreeSet<i32>,
    /// Connections the producer closed.
    pub closed: Vec<ConnId>,
    /// Connects requested.
    pub connects: u32,
    /// Every Produce batch written, in order (retries included).
    pub transmitted: Vec<WireBatch>,
    /// Requests written, by API key.
    pub requests: BTreeMap<i16, u32>,
}

impl Sim {
    /// A producer configured by `cfg` (its bootstrap list is replaced) against `cluster`.
    pub fn new(cluster: Cluster, mut cfg: ProducerConfig) -> Self {
        let now = Instant::now();
        cfg.bootstrap_servers = cluster
            .nodes
            .values()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect();
        cfg.max_sequence = cluster.max_sequence;
        let producer = Producer::new(cfg, now).expect("valid config");
        Self {
            producer,
            cluster,
            links: BTreeMap::new(),
            now,
            events: Vec::new(),
            outcomes: BTreeMap::new(),
            sent: Vec::new(),
            refuse: BTreeSet::new(),
            closed: Vec::new(),
            connects: 0,
            transmitted: Vec::new(),
            requests: BTreeMap::new(),
        }
    }

    /// Milliseconds of virtual time since the start.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.producer.handle_timeout(self.now);
        self.drain();
    }

    /// Sends a record and drains. Panics if the producer refuses it.
    pub fn send(&mut self, record: Record) -> RecordId {
        let id = self
            .producer
            .send(self.now, record.clone())
            .expect("record accepted");
        self.sent.push((id, record));
        self.drain();
        id
    }

    /// Drains the producer's outputs, carrying each out.
    pub fn drain(&mut self) {
        loop {
            match self.producer.poll_output() {
                Output::Wait { .. } => return,
                o => self.carry_out(o),
            }
        }
    }

    /// Carries out one output (not `Wait`).
    fn carry_out(&mut self, o: Output) {
        match o {
            Output::Wait { .. } => {}
            Output::Connect { conn, addr } => {
                self.connects += 1;
                match self.cluster.node_at(&addr) {
                    Some(node) if !self.refuse.contains(&node) => {
                        self.links.insert(conn, Link::new(node));
                        self.producer.handle_connected(self.now, conn);
                    }
                    _ => self.producer.handle_connect_failed(self.now, conn),
                }
            }
            Output::Transmit { conn, bytes } => self.transmit(conn, &bytes),
            Output::Close { conn, .. } => {
                self.links.remove(&conn);
                self.closed.push(conn);
            }
            Output::Event(e) => self.record_event(e),
            Output::SaslInput { .. } => unreachable!("the simulation configures no SASL"),
        }
    }

    /// Writes request bytes to a link, recording what they carry, and checks that no
    /// partition is in flight on two connections at once (P7) nor has more than
    /// `max_in_flight` unanswered batches (P4). A violation panics.
    fn transmit(&mut self, conn: ConnId, bytes: &Bytes) {
        let Some(node) = self.links.get(&conn).map(|l| l.node) else {
            return;
        };
        let max_in_flight = self.producer.config().max_in_flight;
        // A request may arrive in several chunks: inspect it once it is whole.
        let link = self.links.get_mut(&conn).expect("link exists");
        link.partial.extend_from_slice(bytes);
        let frames = split_frames(&mut link.partial);
        for frame in frames {
            let (key, batches) =
                decode_request_batches(frame).expect("the producer wrote an undecodable request");
            *self.requests.entry(key).or_insert(0) += 1;
            let mut parts = Vec::new();
            for (topic, partition, h) in batches {
                let key = (topic.clone(), partition);
                for (other, l) in &self.links {
                    if *other != conn && l.outstanding.iter().any(|r| r.contains(&key)) {
                        panic!(
                            "P7 violated: {topic}-{partition} written to {conn:?} (node {node}) \
                             while {other:?} (node {}) still has it in flight",
                            l.node
                        );
                    }
                }
                let in_flight: usize = self.links[&conn]
                    .outstanding
                    .iter()
                    .filter(|r| r.contains(&key))
                    .count();
                assert!(
                    in_flight < max_in_flight,
                    "P4 violated: {topic}-{partition} has {} batches in flight on {conn:?}",
                    in_flight + 1
                );
                self.transmitted.push(WireBatch {
                    conn,
                    node,
                    topic,
                    partition,
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                    base_sequence: h.base_sequence,
                    count: h.records_count,
                });
                parts.push(key);
            }
            let l = self.links.get_mut(&conn).expect("link checked");
            l.outstanding.push_back(parts);
        }
        if let Some(l) = self.links.get_mut(&conn) {
            l.to_broker.extend_from_slice(bytes);
        }
    }

    fn record_event(&mut self, e: Event) {
        match &e {
            Event::Delivered(d) => {
                for (id, offset) in d.records() {
                    let partition = d.partition;
                    self.record_outcome(id, Outcome::Delivered { partition, offset });
                }
            }
            Event::Failed { id, persisted, .. } => {
                self.record_outcome(*id, Outcome::Failed(*persisted))
            }
            _ => {}
        }
        self.events.push(e);
    }

    fn record_outcome(&mut self, id: RecordId, o: Outcome) {
        if let Some(prev) = self.outcomes.insert(id, o.clone()) {
            panic!("record {id:?} got a second outcome {o:?} after {prev:?}");
        }
    }

    /// The broker processes every whole request waiting on `conn` (at most `limit`).
    pub fn process(&mut self, conn: ConnId, limit: usize) -> usize {
        let Some(l) = self.links.get_mut(&conn) else {
            return 0;
        };
        if l.stalled {
            return 0;
        }
        let node = l.node;
        let mut n = 0;
        let mut frames = VecDeque::from(split_frames(&mut l.to_broker));
        // Put back what exceeds the limit, in order, with size prefixes.
        let mut rest = BytesMut::new();
        while frames.len() > limit {
            let f = frames.pop_back().expect("non-empty");
            let mut framed = BytesMut::new();
            framed.extend_from_slice(&(f.len() as i32).to_be_bytes());
            framed.extend_from_slice(&f);
            framed.extend_from_slice(&rest);
            rest = framed;
        }
        rest.extend_from_slice(&l.to_broker);
        l.to_broker = rest;
        let blackhole = l.blackhole;
        for f in frames {
            if let Some(resp) = self.cluster.handle(node, f) {
                if !blackhole {
                    if let Some(l) = self.links.get_mut(&conn) {
                        l.to_client.push_back(resp);
                    }
                }
            }
            n += 1;
        }
        n
    }

    /// Delivers up to `limit` responses on `conn` to the producer, then drains.
    pub fn deliver(&mut self, conn: ConnId, limit: usize) -> usize {
        let mut n = 0;
        while n < limit {
            let Some(resp) = self.links.get_mut(&conn).and_then(|l| {
                let resp = l.to_client.pop_front()?;
                l.outstanding.pop_front();
                Some(resp)
            }) else {
                break;
            };
            let mut buf = BytesMut::from(&resp[..]);
            self.producer.handle_read(self.now, conn, &mut buf);
            n += 1;
            self.drain();
        }
        n
    }

    /// Breaks `conn` after the broker processed `processed` of its waiting requests; every
    /// undelivered response is lost.
    pub fn disconnect(&mut self, conn: ConnId, processed: usize) {
        self.process(conn, processed);
        self.links.remove(&conn);
        self.producer.handle_disconnected(self.now, conn);
        self.drain();
    }

    /// The first open link to `node`.
    pub fn conn_to(&self, node: i32) -> Option<ConnId> {
        self.links
            .iter()
            .find(|(_, l)| l.node == node)
            .map(|(c, _)| *c)
    }

    /// One round: every link's requests are processed and every response delivered.
    /// Returns whether anything moved.
    pub fn step(&mut self) -> bool {
        self.drain();
        let conns: Vec<ConnId> = self.links.keys().copied().collect();
        let mut moved = false;
        for c in &conns {
            moved |= self.process(*c, usize::MAX) > 0;
        }
        for c in &conns {
            moved |= self.deliver(*c, usize::MAX) > 0;
        }
        moved
    }

    /// Drives until every sent record has an outcome, jumping the clock to the producer's
    /// deadlines when nothing else moves. Panics after `max_steps` rounds.
    pub fn run(&mut self, max_steps: usize) {
        for _ in 0..max_steps {
            if self.all_resolved() {
                return;
            }
            if !self.step() {
                self.jump();
            }
        }
        panic!(
            "not all records resolved after {max_steps} steps: {} of {} outcomes",
            self.outcomes.len(),
            self.sent.len()
        );
    }

    /// Runs rounds until nothing moves (without jumping the clock).
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            if !self.step() {
                return;
            }
        }
        panic!("no quiescence");
    }

    /// Jumps the clock to the producer's next deadline, if it has one.
    pub fn jump(&mut self) {
        let next = match self.producer.poll_output() {
            Output::Wait { until } => until,
            other => {
                // Outputs appeared: put the clock where it is and carry them out.
                self.carry_out(other);
                self.drain();
                return;
            }
        };
        match next {
            Some(t) => {
                self.now = t.max(self.now);
                self.producer.handle_timeout(self.now);
                self.drain();
            }
            None => {
                self.now += Duration::from_millis(100);
                self.producer.handle_timeout(self.now);
                self.drain();
            }
        }
    }

    /// Whether every record sent has an outcome.
    pub fn all_resolved(&self) -> bool {
        self.sent
            .iter()
            .all(|(id, _)| self.outcomes.contains_key(id))
    }

    /// Checks the log of `(topic, partition)` against what was sent and reported:
    /// no duplicates, send order kept, every delivered record present at its offset, no
    /// record reported not persisted present, and each record present sent to this
    /// partition (when sent with an explicit one) and reported delivered here (when
    /// delivered). Records are identified by their value.
    pub fn check_partition(&self, topic: &str, partition: i32) {
        let log = &self.cluster.partition(topic, partition).log;
        let values: Vec<Option<Bytes>> = log.iter().map(|r| r.value.clone()).collect();
        let mut seen = BTreeSet::new();
        for v in values.iter().flatten() {
            assert!(
                seen.insert(v.clone()),
                "duplicate record {v:?} in {topic}-{partition}"
            );
        }
        // Send order of the records that landed in this partition.
        let order: Vec<Bytes> = self
            .sent
            .iter()
            .filter_map(|(_, r)| r.value.clone())
            .filter(|v| seen.contains(v))
            .collect();
        let in_log: Vec<Bytes> = values.iter().flatten().cloned().collect();
        assert_eq!(
            in_log, order,
            "log of {topic}-{partition} is not in send order"
        );
        for (id, r) in &self.sent {
            let Some(v) = &r.value else { continue };
            // A record in this log was sent here: one sent to another partition, or reported
            // delivered in another, would pass the order check above, which looks only at
            // the values present (a model review).
            if seen.contains(v) {
                let reported = match self.outcomes.get(id) {
                    Some(Outcome::Delivered { partition: p, .. }) => Some(*p),
                    _ => None,
                };
                for q in [r.partition, reported].into_iter().flatten() {
                    assert_eq!(q, partition, "record {id:?} is in {topic}-{partition}");
                }
            }
            match self.outcomes.get(id) {
                Some(Outcome::Delivered {
                    partition: p,
                    offset: Some(o),
                }) if *p == partition => {
                    let at = usize::try_from(*o).expect("offset");
                    assert_eq!(
                        log.get(at).and_then(|r| r.value.as_ref()),
                        Some(v),
                        "record {id:?} reported at {o} in {topic}-{partition}"
                    );
                }
                Some(Outcome::Delivered {
                    partition: p,
                    offset: None,
                }) if *p == partition => {
                    assert!(seen.contains(v), "record {id:?} acknowledged but absent");
                }
                Some(Outcome::Failed(Persistence::NotPersisted)) => {
                    assert!(
                        !seen.contains(v),
                        "record {id:?} failed NotPersisted but is in the log"
                    );
                }
                _ => {}
            }
        }
    }
}
