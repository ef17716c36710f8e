//! What the model checker does not cover (it checks the idempotent producer): idempotence
//! off with acks all, 1 and 0, the gap policies and abort/close there, and old brokers
//! (0.11–2.5), against a responder that keeps each partition's log, injects errors, drops
//! answers and disconnects. Every record gets one truthful outcome; with one request in
//! flight, order holds across retries. Written as a review's probes; two of them found bugs,
//! now fixed: under acks=0 a moved leader was learned only at the periodic refresh (Kafka
//! closes an acks=0 connection it refuses, and kprod reconnected to the old leader, every
//! record `Sent` and lost for up to `metadata.max.age.ms`), and `CutPartition` without
//! idempotence wrote a refused later batch after the gap.

mod harness;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use harness::{api_of, partition_answer, produce_error, produce_of, respond, TOPIC};
use kprod_core::protocol::produce::{ProduceRequest, ProduceResponse, TopicProduceResponse};
use kprod_core::protocol::record_batch::RecordBatch;
use kprod_core::protocol::{api_key, encode_response, ErrorCode};
use kprod_core::{
    ConnId, DeliveryError, Diagnostic, Event, GapPolicy, Output, Persistence, Producer,
    ProducerConfig, Record, RecordId,
};

/// A producer id's state in the sequence-checking broker: epoch, last sequence, and the
/// recent batches' (base sequence, base offset).
type ProducerSeqState = (i16, i32, Vec<(i32, i64)>);

/// What the broker does with one batch of a Produce request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    /// Append and answer success.
    Ok,
    /// Refuse with this code (not appended).
    Refuse(ErrorCode),
    /// Append, then answer this error code.
    AppendThen(ErrorCode),
}

/// What happens to the whole request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fate {
    /// Process every batch as `Act`, answer.
    Answer,
    /// Process, then the connection drops before the answer.
    ProcessThenDisconnect,
    /// Never read: the connection drops, nothing processed.
    DropUnprocessed,
    /// Process but never answer (the answer is withheld; the connection stays).
    ProcessSilently,
}

pub struct Net {
    pub p: Producer,
    pub now: Instant,
    pub conns: BTreeMap<ConnId, BytesMut>,
    pub outputs: Vec<Output>,
    /// The broker's log per partition: (value, batch base sequence, producer id, epoch).
    pub log: BTreeMap<i32, Vec<(String, i32, i64, i16)>>,
    /// values sent for each record id
    pub values: HashMap<RecordId, String>,
    pub closes: usize,
    pub produce_versions: Vec<i16>,
    pub init_pid_versions: Vec<i16>,
    pub next_pid: i64,
    /// Produce frames held back (ProcessSilently), with their conn.
    pub held: Vec<(ConnId, Bytes)>,
    /// Sequence-checking broker (Kafka 1.0-2.3 rules) when Some: pid -> (epoch, last seq,
    /// recent (base seq, base offset)).
    pub seq_state: Option<HashMap<i64, ProducerSeqState>>,
    /// Every (pid, epoch, base seq) seen on the wire.
    pub wire: Vec<(i64, i16, i32, String)>,
    /// Two brokers (bench:9092 node 1, bench2:9092 node 2) with this leader, when Some.
    pub leader: Option<i32>,
    pub addrs: HashMap<ConnId, String>,
    pub metadata_requests: usize,
    pub leader_epoch: i32,
    /// Produce requests that reached a broker that does not lead.
    pub misdirected: usize,
}

pub fn cfg_off(acks: i16) -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: vec!["bench:9092".into()],
        linger: Duration::ZERO,
        enable_idempotence: false,
        acks,
        request_timeout: Duration::from_secs(1),
        delivery_timeout: Duration::from_secs(30),
        retry_backoff: Duration::from_millis(10),
        max_batch_records: Some(1),
        ..ProducerConfig::default()
    }
}

impl Net {
    pub fn new(cfg: ProducerConfig) -> Self {
        let now = Instant::now();
        Self {
            p: Producer::new(cfg, now).unwrap(),
            now,
            conns: BTreeMap::new(),
            outputs: Vec::new(),
            log: BTreeMap::new(),
            values: HashMap::new(),
            closes: 0,
            produce_versions: vec![],
            init_pid_versions: vec![],
            next_pid: 7,
            held: vec![],
            seq_state: None,
            wire: vec![],
            leader: None,
            addrs: HashMap::new(),
            metadata_requests: 0,
            leader_epoch: 0,
            misdirected: 0,
        }
    }

    pub fn send(&mut self, v: &str) -> RecordId {
        let id = self
            .p
            .send(self.now, Record::new(TOPIC, v.to_owned()).with_partition(0))
            .unwrap();
        self.values.insert(id, v.to_owned());
        id
    }

    pub fn drain(&mut self) {
        loop {
            match self.p.poll_output() {
                Output::Wait { .. } => return,
                Output::Connect { conn, addr } => {
                    self.conns.insert(conn, BytesMut::new());
                    self.addrs.insert(conn, addr.to_string());
                    self.p.handle_connected(self.now, conn);
                    self.outputs.push(Output::Connect { conn, addr });
                }
                Output::Transmit { conn, bytes } => {
                    if let Some(b) = self.conns.get_mut(&conn) {
                        b.extend_from_slice(&bytes);
                    }
                }
                Output::Close { conn, flush } => {
                    self.conns.remove(&conn);
                    self.closes += 1;
                    self.outputs.push(Output::Close { conn, flush });
                }
                o => self.outputs.push(o),
            }
        }
    }

    fn next_frame(&mut self) -> Option<(ConnId, Bytes)> {
        for (c, buf) in self.conns.iter_mut() {
            if buf.len() >= 4 {
                let len = 4 + i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                if buf.len() >= len {
                    return Some((*c, buf.split_to(len).freeze()));
                }
            }
        }
        None
    }

    pub fn feed(&mut self, conn: ConnId, answer: Bytes) {
        if !self.conns.contains_key(&conn) {
            return;
        }
        let mut buf = BytesMut::from(&answer[..]);
        self.p.handle_read(self.now, conn, &mut buf);
        self.drain();
    }

    pub fn disconnect(&mut self, conn: ConnId) {
        if self.conns.remove(&conn).is_some() {
            self.p.handle_disconnected(self.now, conn);
        }
        self.drain();
    }

    /// `count` rounds of [`Self::run`], each followed by `d` of time.
    pub fn rounds(
        &mut self,
        count: usize,
        d: Duration,
        fate: &mut dyn FnMut(&str) -> Fate,
        act: &mut dyn FnMut(&str, i32) -> Act,
    ) {
        for _ in 0..count {
            self.run(fate, act);
            self.tick(d);
        }
    }

    pub fn tick(&mut self, d: Duration) {
        self.now += d;
        self.p.handle_timeout(self.now);
        self.drain();
    }

    /// Appends the batches of a Produce request to the log per `act`, builds the answer.
    pub fn process(
        &mut self,
        frame: &Bytes,
        act: &mut dyn FnMut(&str, i32) -> Act,
    ) -> Option<Bytes> {
        let (_, version, corr) = api_of(frame);
        let req: ProduceRequest = produce_of(frame);
        self.produce_versions.push(version);
        let mut responses = Vec::new();
        for t in &req.topic_data {
            let mut parts = Vec::new();
            for pd in &t.partition_data {
                let wire = pd.records.clone().unwrap();
                let batch = RecordBatch::decode_own(wire).unwrap();
                let first = batch
                    .records
                    .first()
                    .and_then(|r| r.value.clone())
                    .map(|v| String::from_utf8(v.to_vec()).unwrap())
                    .unwrap_or_default();
                self.wire.push((
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    first.clone(),
                ));
                let log_len = self.log.entry(pd.index).or_default().len() as i64;
                let count = batch.records.len() as i32;
                let verdict: Option<Result<i64, ErrorCode>> = match self.seq_state.as_mut() {
                    Some(st) if batch.producer_id >= 0 => {
                        let (pid, ep, seq) =
                            (batch.producer_id, batch.producer_epoch, batch.base_sequence);
                        match st.get(&pid) {
                            None if seq != 0 => Some(Err(ErrorCode::UnknownProducerId)),
                            None => None,
                            Some((e, _, _)) if ep < *e => {
                                Some(Err(ErrorCode::InvalidProducerEpoch))
                            }
                            Some((e, _, _)) if ep > *e && seq != 0 => {
                                Some(Err(ErrorCode::OutOfOrderSequenceNumber))
                            }
                            Some((e, _, _)) if ep > *e => None,
                            Some((_, last, recent)) => {
                                if let Some((_, off)) = recent.iter().find(|(s, _)| *s == seq) {
                                    Some(Ok(*off))
                                } else if seq == last.wrapping_add(1) {
                                    None
                                } else {
                                    Some(Err(ErrorCode::OutOfOrderSequenceNumber))
                                }
                            }
                        }
                    }
                    _ => None,
                };
                let a = match verdict {
                    Some(Err(c)) => Act::Refuse(c),
                    Some(Ok(_)) => Act::Ok,
                    None => act(&first, pd.index),
                };
                let dup_offset = match verdict {
                    Some(Ok(o)) => Some(o),
                    _ => None,
                };
                let appends = dup_offset.is_none() && matches!(a, Act::Ok | Act::AppendThen(_));
                if appends && batch.producer_id >= 0 {
                    if let Some(st) = self.seq_state.as_mut() {
                        let e = st.entry(batch.producer_id).or_insert((
                            batch.producer_epoch,
                            -1,
                            vec![],
                        ));
                        if batch.producer_epoch != e.0 {
                            *e = (batch.producer_epoch, -1, vec![]);
                        }
                        e.1 = batch.base_sequence + count - 1;
                        e.2.push((batch.base_sequence, log_len));
                        if e.2.len() > 5 {
                            e.2.remove(0);
                        }
                    }
                }
                let log = self.log.entry(pd.index).or_default();
                let base = log.len() as i64;
                let append = |log: &mut Vec<(String, i32, i64, i16)>| {
                    for r in &batch.records {
                        let v = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
                        log.push((
                            v,
                            batch.base_sequence,
                            batch.producer_id,
                            batch.producer_epoch,
                        ));
                    }
                };
                let (code, off) = match a {
                    _ if dup_offset.is_some() => (0, dup_offset.unwrap()),
                    Act::Ok => {
                        append(log);
                        (0, base)
                    }
                    Act::AppendThen(c) => {
                        append(log);
                        (c.as_i16(), -1)
                    }
                    Act::Refuse(c) => (c.as_i16(), -1),
                };
                parts.push(partition_answer(pd.index, code, off));
            }
            responses.push(TopicProduceResponse {
                name: t.name.clone(),
                partition_responses: parts,
            });
        }
        if req.acks == 0 {
            return None;
        }
        Some(encode_response::<ProduceRequest>(
            &ProduceResponse {
                responses,
                throttle_time_ms: 0,
                node_endpoints: vec![],
            },
            version,
            corr,
        ))
    }

    /// Runs until nothing is left to answer. `fate` decides each Produce request's fate (by
    /// the first value of its first batch), `act` each batch.
    pub fn run(
        &mut self,
        fate: &mut dyn FnMut(&str) -> Fate,
        act: &mut dyn FnMut(&str, i32) -> Act,
    ) {
        self.drain();
        let mut guard = 0;
        while let Some((conn, f)) = self.next_frame() {
            guard += 1;
            assert!(guard < 10_000, "runaway");
            let key = api_of(&f).0;
            if key != api_key::PRODUCE {
                if key == api_key::INIT_PRODUCER_ID {
                    self.init_pid_versions.push(api_of(&f).1);
                    let a = self.init_pid(&f);
                    self.feed(conn, a);
                    continue;
                }
                if key == api_key::METADATA {
                    self.metadata_requests += 1;
                }
                if let (Some(leader), api_key::METADATA) = (self.leader, key) {
                    let a = two_broker_metadata(&f, leader, self.leader_epoch);
                    self.feed(conn, a);
                    continue;
                }
                let mut off = 0;
                let a = respond(&f, &mut off);
                self.feed(conn, a);
                continue;
            }
            let req = produce_of(&f);
            if let Some(leader) = self.leader {
                let addr = &self.addrs[&conn];
                let leads = (leader == 1) == addr.starts_with("bench:");
                if !leads {
                    self.misdirected += 1;
                    if req.acks == 0 {
                        // Kafka closes the connection of an acks=0 request it refuses.
                        self.disconnect(conn);
                    } else {
                        let a = produce_error(&f, ErrorCode::NotLeaderOrFollower);
                        self.feed(conn, a);
                    }
                    continue;
                }
            }
            let first = {
                let wire = req.topic_data[0].partition_data[0].records.clone().unwrap();
                let b = RecordBatch::decode_own(wire).unwrap();
                String::from_utf8(b.records[0].value.clone().unwrap().to_vec()).unwrap()
            };
            match fate(&first) {
                Fate::Answer => {
                    if let Some(a) = self.process(&f, act) {
                        self.feed(conn, a);
                    }
                }
                Fate::ProcessThenDisconnect => {
                    self.process(&f, act);
                    self.disconnect(conn);
                }
                Fate::DropUnprocessed => self.disconnect(conn),
                Fate::ProcessSilently => {
                    self.process(&f, act);
                    self.held.push((conn, f));
                }
            }
        }
    }

    fn init_pid(&mut self, f: &Bytes) -> Bytes {
        use kprod_core::protocol::init_producer_id::{
            InitProducerIdRequest, InitProducerIdResponse,
        };
        let (_, version, corr) = api_of(f);
        let pid = self.next_pid;
        self.next_pid += 1;
        encode_response::<InitProducerIdRequest>(
            &InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: 0,
                producer_id: pid,
                producer_epoch: 0,
            },
            version,
            corr,
        )
    }

    pub fn events(&self) -> Vec<Event> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(Event::Diagnostic(_)) => None,
                Output::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn diags(&self) -> Vec<Diagnostic> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(Event::Diagnostic(d)) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    /// Outcome per record id: ("D", offset) / ("S", -) / ("F", persisted).
    pub fn outcomes(&self) -> BTreeMap<RecordId, Vec<Outcome>> {
        let mut m: BTreeMap<RecordId, Vec<Outcome>> = BTreeMap::new();
        for e in self.events() {
            match e {
                Event::Delivered(d) => {
                    for (id, o) in d.records() {
                        m.entry(id).or_default().push(Outcome::Delivered(o));
                    }
                }
                Event::Sent(s) => {
                    for id in s.ids {
                        m.entry(id).or_default().push(Outcome::Sent);
                    }
                }
                Event::Failed {
                    id,
                    error,
                    persisted,
                    ..
                } => m
                    .entry(id)
                    .or_default()
                    .push(Outcome::Failed(error, persisted)),
                _ => {}
            }
        }
        m
    }

    pub fn log_values(&self, p: i32) -> Vec<String> {
        self.log
            .get(&p)
            .map(|l| l.iter().map(|e| e.0.clone()).collect())
            .unwrap_or_default()
    }

    /// Every record exactly one outcome; Delivered offsets point at the value; NotPersisted
    /// records are not in the log.
    pub fn check_truthful(&self) {
        let outcomes = self.outcomes();
        let log = self.log_values(0);
        for (id, v) in &self.values {
            let o = outcomes
                .get(id)
                .unwrap_or_else(|| panic!("{v} has no outcome"));
            assert_eq!(o.len(), 1, "{v}: {o:?}");
            match &o[0] {
                Outcome::Delivered(Some(off)) => {
                    assert_eq!(
                        log.get(*off as usize),
                        Some(v),
                        "{v} delivered at {off}, log {log:?}"
                    )
                }
                Outcome::Failed(_, Persistence::NotPersisted) => {
                    assert!(!log.contains(v), "{v} NotPersisted but in the log {log:?}")
                }
                _ => {}
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Delivered(Option<i64>),
    Sent,
    Failed(DeliveryError, Persistence),
}

fn ok_fate(_: &str) -> Fate {
    Fate::Answer
}
fn ok_act(_: &str, _: i32) -> Act {
    Act::Ok
}

// ---------------------------------------------------------------------------------------
// Idempotence off, acks=1, max in flight 1: order across retries.

#[test]
fn mif1_order_kept_across_not_leader_retry() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 1;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    // a refused once (NOT_LEADER), b and c queued behind it.
    n.send("a");
    n.send("b");
    n.send("c");
    let mut refused = false;
    n.rounds(50, Duration::from_millis(50), &mut ok_fate, &mut |v, _| {
        if v == "a" && !refused {
            refused = true;
            Act::Refuse(ErrorCode::NotLeaderOrFollower)
        } else {
            Act::Ok
        }
    });
    n.run(&mut ok_fate, &mut ok_act);
    assert_eq!(n.log_values(0), vec!["warm", "a", "b", "c"]);
    n.check_truthful();
}

#[test]
fn mif1_order_kept_across_lost_answer() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 1;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.send("b");
    n.send("c");
    let mut lost = false;
    n.rounds(
        100,
        Duration::from_millis(100),
        &mut |v| {
            if v == "a" && !lost {
                lost = true;
                Fate::ProcessThenDisconnect
            } else {
                Fate::Answer
            }
        },
        &mut ok_act,
    );
    // a is duplicated, but b and c come after.
    assert_eq!(n.log_values(0), vec!["warm", "a", "a", "b", "c"]);
    n.check_truthful();
}

#[test]
fn mif1_order_kept_across_request_timeout() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 1;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.send("b");
    let mut silent = false;
    n.rounds(
        100,
        Duration::from_millis(100),
        &mut |v| {
            if v == "a" && !silent {
                silent = true;
                Fate::ProcessSilently
            } else {
                Fate::Answer
            }
        },
        &mut ok_act,
    );
    assert_eq!(n.log_values(0), vec!["warm", "a", "a", "b"]);
    n.check_truthful();
}

// ---------------------------------------------------------------------------------------
// acks=1, max in flight 5: reorder allowed, outcomes truthful.

#[test]
fn mif5_errors_and_disconnects_outcomes_truthful() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 5;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for i in 0..40 {
        n.send(&format!("r{i}"));
    }
    for round in 0..400 {
        let mut fate = |v: &str| {
            let k = seen.entry(v.to_owned()).or_default();
            *k += 1;
            let h = v.bytes().map(|b| b as usize).sum::<usize>() + *k * 7 + round;
            match h % 9 {
                0 if *k < 3 => Fate::ProcessThenDisconnect,
                1 if *k < 3 => Fate::DropUnprocessed,
                _ => Fate::Answer,
            }
        };
        let mut act = |v: &str, _| {
            let h = v.bytes().map(|b| b as usize).sum::<usize>() + round;
            match h % 11 {
                0 => Act::Refuse(ErrorCode::NotLeaderOrFollower),
                1 => Act::AppendThen(ErrorCode::UnknownServerError),
                2 => Act::Refuse(ErrorCode::InvalidRecord),
                3 => Act::Refuse(ErrorCode::NotEnoughReplicas),
                4 => Act::Refuse(ErrorCode::OutOfOrderSequenceNumber),
                _ => Act::Ok,
            }
        };
        n.run(&mut fate, &mut act);
        n.tick(Duration::from_millis(30));
        if n.p.pending_records() == 0 {
            break;
        }
    }
    assert_eq!(n.p.pending_records(), 0);
    n.check_truthful();
}

// ---------------------------------------------------------------------------------------
// acks=0

#[test]
fn acks0_hostile_answers_with_errors_are_ignored() {
    let mut n = Net::new(cfg_off(0));
    n.send("a");
    n.drain();
    // Answer every acks=0 Produce anyway, with an error.
    let mut frames = vec![];
    for _ in 0..10 {
        while let Some((c, f)) = n.next_frame() {
            if api_of(&f).0 == api_key::PRODUCE {
                frames.push((c, f));
                continue;
            }
            let mut o = 0;
            let a = respond(&f, &mut o);
            n.feed(c, a);
        }
    }
    assert_eq!(frames.len(), 1);
    n.send("b");
    n.drain();
    let (c, f) = frames[0].clone();
    // Answer the acks=0 produce with a real answer built as if acks=1 and error.
    let mut err = produce_error(&f, ErrorCode::MessageTooLarge);
    let _ = &mut err;
    n.feed(c, err);
    n.run(&mut ok_fate, &mut ok_act);
    let o = n.outcomes();
    assert!(o.values().all(|v| v == &vec![Outcome::Sent]), "{o:?}");
    assert_eq!(o.len(), 2);
    assert_eq!(n.closes, 0);
}

#[test]
fn acks0_busy_connection_is_not_closed_as_idle() {
    let mut cfg = cfg_off(0);
    cfg.connections_max_idle = Some(Duration::from_secs(10));
    cfg.metadata_max_age = Duration::from_secs(3600);
    let mut n = Net::new(cfg);
    for i in 0..30 {
        n.send(&format!("r{i}"));
        n.run(&mut ok_fate, &mut ok_act);
        n.tick(Duration::from_secs(1));
    }
    let idle: Vec<_> = n
        .diags()
        .into_iter()
        .filter(|d| format!("{d:?}").contains("idle"))
        .collect();
    assert_eq!(n.log_values(0).len(), 30);
    // ConnId(0) is the bootstrap connection (Metadata only): its idle close is right.
    let node_closed = n.outputs.iter().any(|o| {
        matches!(
            o,
            Output::Close {
                conn: ConnId(1),
                ..
            }
        )
    });
    assert!(
        !node_closed,
        "a connection writing a request every second was closed as idle: {idle:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Gap policies with idempotence off.

fn cut_scenario(idempotent: bool) -> Net {
    let mut cfg = cfg_off(if idempotent { -1 } else { 1 });
    cfg.enable_idempotence = idempotent;
    cfg.max_in_flight = 5;
    cfg.gap_policy = GapPolicy::CutPartition;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.send("b");
    n.drain();
    let mut b_refused = false;
    n.rounds(
        50,
        Duration::from_millis(50),
        &mut ok_fate,
        &mut |v, _| match v {
            "a" => Act::Refuse(ErrorCode::InvalidRecord),
            "b" if !b_refused => {
                b_refused = true;
                Act::Refuse(ErrorCode::NotEnoughReplicas)
            }
            _ => Act::Ok,
        },
    );
    n
}

#[test]
fn cut_partition_idempotent_cuts_the_refused_batch_behind_the_gap() {
    let n = cut_scenario(true);
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    assert_eq!(n.log_values(0), vec!["warm"]);
    n.check_truthful();
}

#[test]
fn cut_partition_without_idempotence_writes_a_refused_later_batch_after_the_gap() {
    let n = cut_scenario(false);
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    n.check_truthful();
    // CutPartition: "the partition's log stays a prefix of what was sent". b was refused
    // (NOT_ENOUGH_REPLICAS: not written) after a's refusal for good cut the partition.
    assert_eq!(
        n.log_values(0),
        vec!["warm"],
        "b written after the gap left by a"
    );
}

#[test]
fn gap_fatal_without_idempotence_truthful() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 5;
    cfg.gap_policy = GapPolicy::Fatal;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.send("b");
    n.send("c");
    n.drain();
    // a refused for good; b processed silently (in flight at the stop)
    n.run(
        &mut |v| {
            if v == "b" {
                Fate::ProcessSilently
            } else {
                Fate::Answer
            }
        },
        &mut |v, _| {
            if v == "a" {
                Act::Refuse(ErrorCode::InvalidRecord)
            } else {
                Act::Ok
            }
        },
    );
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    assert!(n.events().iter().any(|e| matches!(e, Event::Fatal(_))));
    n.check_truthful();
    let o = n.outcomes();
    let b = n.values.iter().find(|(_, v)| *v == "b").unwrap().0;
    assert!(
        matches!(o[b][0], Outcome::Failed(_, Persistence::PossiblyPersisted)),
        "{o:?}"
    );
}

// ---------------------------------------------------------------------------------------
// abort / close

#[test]
fn abort_mid_retries_acks1_then_late_answers() {
    let mut cfg = cfg_off(1);
    cfg.max_in_flight = 5;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.send("b");
    n.send("c");
    // a: processed, connection dropped -> retry possibly persisted.
    let mut lost = false;
    n.run(
        &mut |v| {
            if v == "a" && !lost {
                lost = true;
                Fate::ProcessThenDisconnect
            } else {
                Fate::ProcessSilently
            }
        },
        &mut ok_act,
    );
    n.tick(Duration::from_millis(5));
    n.run(&mut |_| Fate::ProcessSilently, &mut ok_act);
    n.p.abort(n.now, "test");
    n.drain();
    // late answers to anything held
    let held = std::mem::take(&mut n.held);
    for (c, f) in held {
        let mut o = 0;
        let a = respond(&f, &mut o);
        let mut buf = BytesMut::from(&a[..]);
        n.p.handle_read(n.now, c, &mut buf);
        n.drain();
    }
    n.tick(Duration::from_secs(60));
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    n.check_truthful();
    assert_eq!(n.p.pending_records(), 0);
    let o = n.outcomes();
    for (id, v) in &n.values {
        if n.log_values(0).contains(v) {
            assert!(
                !matches!(o[id][0], Outcome::Failed(_, Persistence::NotPersisted)),
                "{v}"
            );
        }
    }
}

#[test]
fn close_acks0_resolves_everything_sent() {
    let mut n = Net::new(cfg_off(0));
    for i in 0..5 {
        n.send(&format!("r{i}"));
    }
    n.p.close(n.now);
    n.run(&mut ok_fate, &mut ok_act);
    n.tick(Duration::from_millis(10));
    n.run(&mut ok_fate, &mut ok_act);
    assert!(n.p.is_closed(), "{:?}", n.outputs);
    let o = n.outcomes();
    assert_eq!(o.len(), 5);
    assert!(o.values().all(|v| v == &vec![Outcome::Sent]), "{o:?}");
}

// ---------------------------------------------------------------------------------------
// split without idempotence

#[test]
fn split_without_idempotence_and_after_lost_answer() {
    let mut cfg = cfg_off(1);
    cfg.max_batch_records = None;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.p.send(n.now, Record::new(TOPIC, "x0").with_partition(0))
        .map(|id| n.values.insert(id, "x0".into()))
        .unwrap();
    n.p.send(n.now, Record::new(TOPIC, "x1").with_partition(0))
        .map(|id| n.values.insert(id, "x1".into()))
        .unwrap();
    let mut first = true;
    n.rounds(30, Duration::from_millis(50), &mut ok_fate, &mut |v, _| {
        if v == "x0" && first {
            first = false;
            Act::Refuse(ErrorCode::MessageTooLarge)
        } else {
            Act::Ok
        }
    });
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    assert_eq!(n.log_values(0), vec!["warm", "x0", "x1"]);
    n.check_truthful();
}

// ---------------------------------------------------------------------------------------
// Old brokers, idempotent, with a sequence-checking broker.

fn old_broker_chaos(release: &str, seed: u64, acks_all_idem: bool) -> Net {
    let mut cfg = cfg_off(-1);
    cfg.enable_idempotence = acks_all_idem;
    cfg.broker_version_max = Some(release.into());
    cfg.max_in_flight = 5;
    let mut n = Net::new(cfg);
    n.seq_state = Some(HashMap::new());
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    let mut sent = 0;
    for _round in 0..600 {
        if sent < 40 && next() % 3 == 0 {
            n.send(&format!("r{sent}"));
            sent += 1;
        }
        let r1 = next();
        let r2 = next();
        let mut k = 0u64;
        let mut fate = |_: &str| {
            k += 1;
            match (r1 >> (k % 40)) % 23 {
                0 => Fate::ProcessThenDisconnect,
                1 => Fate::DropUnprocessed,
                _ => Fate::Answer,
            }
        };
        let mut j = 0u64;
        let mut act = |_: &str, _| {
            j += 1;
            match (r2 >> (j % 40)) % 19 {
                0 => Act::Refuse(ErrorCode::NotLeaderOrFollower),
                1 => Act::AppendThen(ErrorCode::NotLeaderOrFollower),
                2 => Act::Refuse(ErrorCode::NotEnoughReplicas),
                3 => Act::AppendThen(ErrorCode::NotEnoughReplicasAfterAppend),
                4 => Act::Refuse(ErrorCode::KafkaStorageError),
                _ => Act::Ok,
            }
        };
        n.run(&mut fate, &mut act);
        // broker state loss while idle only (the documented requirement)
        if n.p.pending_records() == 0 && next() % 5 == 0 {
            n.seq_state.as_mut().unwrap().clear();
        }
        n.tick(Duration::from_millis(20 + next() % 200));
        if sent == 40 && n.p.pending_records() == 0 {
            break;
        }
    }
    n.rounds(200, Duration::from_millis(200), &mut ok_fate, &mut ok_act);
    n
}

fn check_idempotent(n: &Net, no_bump: bool) {
    n.check_truthful();
    assert_eq!(n.p.pending_records(), 0);
    let log = n.log_values(0);
    // exactly once: no value twice in the log
    let mut seen = std::collections::HashSet::new();
    for v in &log {
        assert!(seen.insert(v.clone()), "{v} twice in the log {log:?}");
    }
    // order: delivered records in send order
    let o = n.outcomes();
    let mut last = -1;
    let mut ids: Vec<_> = n.values.keys().copied().collect();
    ids.sort();
    for id in ids {
        if let Outcome::Delivered(Some(off)) = o[&id][0] {
            assert!(
                off > last,
                "reordered: {:?} at {off} after {last}",
                n.values[&id]
            );
            last = off;
        }
    }
    if no_bump {
        assert!(
            n.wire.iter().all(|w| w.1 <= 0),
            "an epoch bump on a broker without KIP-360: {:?}",
            n.wire.iter().filter(|w| w.1 > 0).collect::<Vec<_>>()
        );
    }
}

#[test]
fn old_brokers_chaos_idempotent() {
    for release in ["0.11", "1.0", "2.0", "2.3", "2.4", "2.5"] {
        for seed in 1..40u64 {
            let n = old_broker_chaos(release, seed * 7919, true);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_idempotent(&n, release != "2.5")
            }));
            if r.is_err() {
                eprintln!("release {release} seed {seed}: log {:?}", n.log_values(0));
                eprintln!("wire {:?}", n.wire);
                eprintln!("outcomes {:?}", n.outcomes());
                panic!("release {release} seed {seed}");
            }
        }
    }
}

#[test]
fn old_brokers_chaos_idempotence_off_acks_all() {
    for release in ["0.11", "2.3"] {
        for seed in 1..40u64 {
            let n = old_broker_chaos(release, seed * 104729, false);
            n.check_truthful();
            assert_eq!(n.p.pending_records(), 0, "{release} {seed}");
        }
    }
}

#[test]
fn old_broker_chaos_stats() {
    // The release's newest Produce and InitProducerId versions (both kprod's too).
    for (release, produce, init) in [("0.11", 3, 0), ("2.3", 7, 1), ("2.5", 8, 3)] {
        let mut tot = (0, 0, 0, 0, 0);
        for seed in 1..40u64 {
            let n = old_broker_chaos(release, seed * 7919, true);
            let o = n.outcomes();
            // Every record resolved, once and truthfully; no fatal error.
            n.check_truthful();
            assert_eq!(n.p.pending_records(), 0, "{release} seed {seed}");
            assert!(
                n.p.fatal_error().is_none(),
                "{release} seed {seed}: {:?}",
                n.p.fatal_error()
            );
            let pids: std::collections::BTreeSet<i64> = n.wire.iter().map(|w| w.0).collect();
            if release == "2.5" {
                // KIP-360: the producer bumps its epoch; it keeps its producer id.
                assert_eq!(pids.len(), 1, "{release} seed {seed}: {pids:?}");
            }
            tot.0 += n.wire.len();
            tot.1 += pids.len();
            tot.2 += o
                .values()
                .filter(|v| matches!(v[0], Outcome::Failed(..)))
                .count();
            tot.3 += n.log_values(0).len();
            tot.4 += n.closes;
        }
        eprintln!(
            "{release}: batches on wire {}, pids {}, failed {}, log {}, closes {}",
            tot.0, tot.1, tot.2, tot.3, tot.4
        );
        // 40 records and a warm-up per seed: the chaos made retries, and the logs hold no
        // more records than were sent (each at most once).
        let records = 39 * 41;
        assert!(tot.0 > records, "{release}: no retry in {} batches", tot.0);
        assert!(tot.3 <= records, "{release}: {} records in the logs", tot.3);
        if release != "2.5" {
            // No KIP-360: a new producer id instead of a bump, in some seeds at least.
            assert!(tot.1 > 39, "{release}: {} producer ids in 39 runs", tot.1);
        }
        let n = old_broker_chaos(release, 7919, true);
        eprintln!(
            "versions {:?} init {:?}",
            n.produce_versions
                .iter()
                .collect::<std::collections::BTreeSet<_>>(),
            n.init_pid_versions
        );
        assert!(
            n.produce_versions.iter().all(|v| *v == produce),
            "{release}: Produce {:?}",
            n.produce_versions
        );
        assert!(!n.init_pid_versions.is_empty(), "{release}");
        assert!(
            n.init_pid_versions.iter().all(|v| *v == init),
            "{release}: InitProducerId {:?}",
            n.init_pid_versions
        );
    }
}

fn two_broker_metadata(f: &Bytes, leader: i32, epoch: i32) -> Bytes {
    let (_, version, corr) = api_of(f);
    let partition = kprod_core::protocol::metadata::MetadataPartition {
        error_code: 0,
        partition_index: 0,
        leader_id: leader,
        leader_epoch: epoch,
        replica_nodes: vec![1, 2],
        isr_nodes: vec![1, 2],
        offline_replicas: vec![],
    };
    harness::support::metadata_answer(version, corr, &[1, 2], vec![partition])
}

/// acks=0: the leader moves; the old leader closes the connection of every acks=0 request
/// it refuses (Kafka's KafkaApis: "the server will close socket server so that the producer
/// client will know that some error has happened and will refresh its metadata").
fn leader_move_scenario(acks: i16) -> Net {
    let mut cfg = cfg_off(acks);
    cfg.max_batch_records = None;
    let mut n = Net::new(cfg);
    n.leader = Some(1);
    n.send("warm");
    n.rounds(5, Duration::from_millis(10), &mut ok_fate, &mut ok_act);
    assert_eq!(n.log_values(0), vec!["warm"]);
    n.leader = Some(2);
    n.leader_epoch += 1;
    // One record every 100 ms for 30 s.
    for i in 0..300 {
        n.send(&format!("r{i}"));
        n.run(&mut ok_fate, &mut ok_act);
        n.tick(Duration::from_millis(100));
    }
    n
}

#[test]
fn acks0_leader_move_is_learned_from_the_closed_connection() {
    let n = leader_move_scenario(0);
    let log = n.log_values(0);
    eprintln!(
        "acks=0: log holds {} of 301; misdirected requests {}; metadata requests {}; outcomes Sent {}",
        log.len(),
        n.misdirected,
        n.metadata_requests,
        n.outcomes().values().filter(|v| v[0] == Outcome::Sent).count()
    );
    // Java asks for metadata at the first disconnect: a handful of records lost, not 30 s.
    assert!(
        log.len() > 290,
        "only {} of 301 records reached the log",
        log.len()
    );
}

#[test]
fn acks1_leader_move_for_comparison() {
    let n = leader_move_scenario(1);
    let log = n.log_values(0);
    eprintln!(
        "acks=1: log holds {} of 301; misdirected {}; metadata {}",
        log.len(),
        n.misdirected,
        n.metadata_requests
    );
    n.check_truthful();
    // Retried after the refusals (acks=1 waits for each answer): every record delivered,
    // not merely truthfully failed (a test audit: `check_truthful` alone passes an empty log).
    let delivered = (n.outcomes().values())
        .filter(|v| matches!(v[0], Outcome::Delivered(_)))
        .count();
    assert_eq!(delivered, 301, "acks=1: delivered {delivered} of 301");
    assert_eq!(log.len(), 301, "acks=1: the log holds {} of 301", log.len());
}

#[test]
fn leader_move_old_brokers() {
    for (release, idem) in [
        ("0.11", true),
        ("2.3", true),
        ("0.11", false),
        ("1.0", false),
    ] {
        let mut cfg = cfg_off(if idem { -1 } else { 1 });
        cfg.enable_idempotence = idem;
        cfg.broker_version_max = Some(release.into());
        cfg.max_in_flight = 5;
        let mut n = Net::new(cfg);
        n.seq_state = Some(HashMap::new());
        n.leader = Some(1);
        n.send("warm");
        n.rounds(5, Duration::from_millis(10), &mut ok_fate, &mut ok_act);
        for i in 0..100 {
            if i == 20 {
                n.leader = Some(2);
                n.leader_epoch += 1;
            }
            if i == 60 {
                n.leader = Some(1);
                n.leader_epoch += 1;
            }
            n.send(&format!("r{i}"));
            n.send(&format!("s{i}"));
            let mut k = 0;
            n.run(
                &mut |_| {
                    k += 1;
                    if (i + k) % 13 == 0 {
                        Fate::ProcessThenDisconnect
                    } else {
                        Fate::Answer
                    }
                },
                &mut |_, _| {
                    if i % 7 == 0 {
                        Act::AppendThen(ErrorCode::NotLeaderOrFollower)
                    } else {
                        Act::Ok
                    }
                },
            );
            n.tick(Duration::from_millis(100));
        }
        n.rounds(100, Duration::from_millis(200), &mut ok_fate, &mut ok_act);
        eprintln!(
            "{release} idem {idem}: log {} misdirected {} metadata {}",
            n.log_values(0).len(),
            n.misdirected,
            n.metadata_requests
        );
        if idem {
            check_idempotent(&n, true);
        } else {
            n.check_truthful();
            assert_eq!(n.p.pending_records(), 0);
        }
    }
}

#[test]
fn mif1_chaos_keeps_order_without_idempotence() {
    for acks in [1i16, -1] {
        for seed in 1..60u64 {
            let mut cfg = cfg_off(acks);
            cfg.max_in_flight = 1;
            cfg.delivery_timeout = Duration::from_secs(3);
            let mut n = Net::new(cfg);
            let mut rng = seed * 2654435761;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut sent = 0;
            for _ in 0..800 {
                if sent < 40 && next() % 3 == 0 {
                    n.send(&format!("r{sent:03}"));
                    sent += 1;
                }
                let (r1, r2) = (next(), next());
                n.run(
                    &mut |_| match r1 % 17 {
                        0 => Fate::ProcessThenDisconnect,
                        1 => Fate::DropUnprocessed,
                        2 => Fate::ProcessSilently,
                        _ => Fate::Answer,
                    },
                    &mut |_, _| match r2 % 13 {
                        0 => Act::Refuse(ErrorCode::NotLeaderOrFollower),
                        1 => Act::AppendThen(ErrorCode::UnknownServerError),
                        2 => Act::Refuse(ErrorCode::NotEnoughReplicas),
                        3 => Act::AppendThen(ErrorCode::NotEnoughReplicasAfterAppend),
                        4 => Act::Refuse(ErrorCode::MessageTooLarge),
                        5 => Act::Refuse(ErrorCode::InvalidRecord),
                        _ => Act::Ok,
                    },
                );
                n.tick(Duration::from_millis(10 + next() % 300));
                if sent == 40 && n.p.pending_records() == 0 {
                    break;
                }
            }
            n.rounds(100, Duration::from_millis(200), &mut ok_fate, &mut ok_act);
            let log = n.log_values(0);
            n.check_truthful();
            assert_eq!(n.p.pending_records(), 0);
            for w in log.windows(2) {
                assert!(
                    w[0] <= w[1],
                    "acks {acks} seed {seed}: order broken {log:?}"
                );
            }
            let o = n.outcomes();
            let failed = o
                .values()
                .filter(|v| matches!(v[0], Outcome::Failed(..)))
                .count();
            let pp = o
                .values()
                .filter(|v| matches!(v[0], Outcome::Failed(_, Persistence::PossiblyPersisted)))
                .count();
            if seed % 10 == 0 {
                eprintln!(
                    "acks {acks} seed {seed}: log {} failed {failed} (possibly {pp}) wire {}",
                    log.len(),
                    n.wire.len()
                );
            }
        }
    }
}

#[test]
fn gap_policies_ignore_identity_error_failures_without_idempotence() {
    for policy in [GapPolicy::Fatal, GapPolicy::CutPartition] {
        let mut cfg = cfg_off(1);
        cfg.max_in_flight = 1;
        cfg.gap_policy = policy;
        let mut n = Net::new(cfg);
        n.send("warm");
        n.run(&mut ok_fate, &mut ok_act);
        n.send("a");
        n.send("b");
        n.rounds(10, Duration::from_millis(50), &mut ok_fate, &mut |v, _| {
            if v == "a" {
                Act::Refuse(ErrorCode::OutOfOrderSequenceNumber)
            } else {
                Act::Ok
            }
        });
        eprintln!(
            "{policy:?}: log {:?} outcomes {:?} fatal {:?}",
            n.log_values(0),
            n.outcomes(),
            n.p.fatal_error()
        );
        n.check_truthful();
        assert_eq!(n.p.pending_records(), 0, "{policy:?}");
        // Neither policy applies: no fatal error (Fatal), b not cut behind a (CutPartition).
        assert!(n.p.fatal_error().is_none(), "{policy:?}");
        assert!(
            !n.events().iter().any(|e| matches!(e, Event::Fatal(_))),
            "{policy:?}"
        );
        let o = n.outcomes();
        let outcome = |v: &str| &o[n.values.iter().find(|(_, x)| *x == v).unwrap().0];
        assert_eq!(
            outcome("a"),
            &vec![Outcome::Failed(
                DeliveryError::Broker(ErrorCode::OutOfOrderSequenceNumber),
                Persistence::NotPersisted
            )],
            "{policy:?}"
        );
        assert_eq!(
            outcome("b"),
            &vec![Outcome::Delivered(Some(1))],
            "{policy:?}"
        );
        assert_eq!(n.log_values(0), vec!["warm", "b"], "{policy:?}");
    }
}

#[test]
fn acks0_leader_move_how_long_until_metadata() {
    let mut cfg = cfg_off(0);
    cfg.max_batch_records = None;
    let mut n = Net::new(cfg);
    n.leader = Some(1);
    n.send("warm");
    n.rounds(5, Duration::from_millis(10), &mut ok_fate, &mut ok_act);
    n.leader = Some(2);
    n.leader_epoch += 1;
    let start = n.now;
    let m0 = n.metadata_requests;
    let mut lost = 0;
    for i in 0..400 {
        n.send(&format!("r{i}"));
        let before = n.misdirected;
        n.run(&mut ok_fate, &mut ok_act);
        lost += n.misdirected - before;
        if n.metadata_requests > m0 && n.log_values(0).len() > 1 {
            break;
        }
        n.tick(Duration::from_secs(1));
    }
    eprintln!("first metadata request after the move: {:?}; acks=0 requests refused by the old leader meanwhile: {lost}; log {}",
        n.now - start, n.log_values(0).len());
    assert!(n.now - start < Duration::from_secs(5));
}

/// Record a refused for good and b0's batch (behind it) refused MESSAGE_TOO_LARGE, under
/// `CutPartition`: b0 and b1 are split and retried, and neither is written after the gap
/// left by a, with idempotence or without.
fn cut_split_of_later_batch(idempotent: bool) {
    let mut cfg = cfg_off(if idempotent { -1 } else { 1 });
    cfg.enable_idempotence = idempotent;
    cfg.max_in_flight = 5;
    cfg.max_batch_records = None;
    cfg.gap_policy = GapPolicy::CutPartition;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.drain();
    n.send("b0");
    n.send("b1");
    n.drain();
    let mut b_refused = false;
    n.rounds(
        50,
        Duration::from_millis(50),
        &mut ok_fate,
        &mut |v, _| match v {
            "a" => Act::Refuse(ErrorCode::InvalidRecord),
            "b0" if !b_refused => {
                b_refused = true;
                Act::Refuse(ErrorCode::MessageTooLarge)
            }
            _ => Act::Ok,
        },
    );
    eprintln!("log {:?}\noutcomes {:?}", n.log_values(0), n.outcomes());
    n.check_truthful();
    assert!(b_refused, "b0's batch was answered");
    assert_eq!(
        n.log_values(0),
        vec!["warm"],
        "b written after the gap left by a"
    );
}

#[test]
fn cut_without_idempotence_split_of_later_batch() {
    cut_split_of_later_batch(false);
}

#[test]
fn cut_idempotent_split_of_later_batch() {
    cut_split_of_later_batch(true);
}

#[test]
fn acks0_broker_closes_every_connection() {
    let mut cfg = cfg_off(0);
    cfg.max_batch_records = None;
    let mut n = Net::new(cfg);
    n.send("warm");
    n.rounds(3, Duration::from_millis(10), &mut ok_fate, &mut ok_act);
    let m0 = n.metadata_requests;
    let c0 = n
        .outputs
        .iter()
        .filter(|o| matches!(o, Output::Connect { .. }))
        .count();
    // 10 s: a record every 10 ms, and the broker closes the connection at each request.
    for i in 0..1000 {
        n.send(&format!("r{i}"));
        n.run(&mut |_| Fate::DropUnprocessed, &mut ok_act);
        n.tick(Duration::from_millis(10));
    }
    let c1 = n
        .outputs
        .iter()
        .filter(|o| matches!(o, Output::Connect { .. }))
        .count();
    let (metadata, connects) = (n.metadata_requests - m0, c1 - c0);
    eprintln!("metadata requests {metadata} connects {connects}");
    // No storm: at most one metadata request per reconnect, reconnects paced by the backoff.
    assert!(
        metadata <= connects + 1,
        "{metadata} metadata requests, {connects} connects"
    );
    assert!(connects <= 250, "{connects} connects in 10 s");
}

fn cut_after_a_lost_answer(idempotent: bool) -> Net {
    let mut cfg = cfg_off(if idempotent { -1 } else { 1 });
    cfg.enable_idempotence = idempotent;
    cfg.max_in_flight = 5;
    cfg.gap_policy = GapPolicy::CutPartition;
    let mut n = Net::new(cfg);
    n.seq_state = Some(HashMap::new());
    n.send("warm");
    n.run(&mut ok_fate, &mut ok_act);
    n.send("a");
    n.drain();
    n.send("b");
    n.drain();
    let mut dropped = false;
    n.rounds(
        50,
        Duration::from_millis(50),
        &mut |v| {
            if v == "b" && !dropped {
                dropped = true;
                Fate::DropUnprocessed
            } else {
                Fate::Answer
            }
        },
        &mut |v, _| match v {
            "a" => Act::Refuse(ErrorCode::InvalidRecord),
            _ => Act::Ok,
        },
    );
    eprintln!(
        "idem {idempotent}: log {:?}\noutcomes {:?}",
        n.log_values(0),
        n.outcomes()
    );
    n.check_truthful();
    n
}

#[test]
fn cut_ambiguous_idempotent() {
    let n = cut_after_a_lost_answer(true);
    assert_eq!(n.log_values(0), vec!["warm"]);
}

#[test]
fn cut_ambiguous_without_idempotence() {
    let n = cut_after_a_lost_answer(false);
    assert_eq!(
        n.log_values(0),
        vec!["warm"],
        "b written after the gap left by a"
    );
}

/// A broker that does not serve InitProducerId at all, answered by a producer with
/// idempotence on and off. Without idempotence no InitProducerId is ever sent, so the
/// records are delivered, as the Java client delivers them (it checks versions per request):
/// OCI Streaming, KoP without transactions and the Kafka 2.8 KRaft preview are such brokers.
/// Before (review finding, 2026-12-06), the handshake failed `UnsupportedVersions
/// ("InitProducerId")` either way. With idempotence on it still does.
fn to_a_broker_without_init_producer_id(idempotent: bool) -> harness::Harness {
    let mut h = harness::Harness::new(|c| {
        c.enable_idempotence = idempotent;
        if !idempotent {
            c.acks = 1;
            c.max_in_flight = 1;
        }
    });
    h.p.send(h.now, Record::new(TOPIC, "a")).unwrap();
    h.drain();
    for _ in 0..20 {
        let Some(f) = h.next_frame() else { break };
        let (key, version, corr) = api_of(&f);
        let a = if key == api_key::API_VERSIONS {
            use kprod_core::protocol::api_versions::{
                ApiVersion, ApiVersionsRequest, ApiVersionsResponse,
            };
            let resp = ApiVersionsResponse {
                error_code: 0,
                api_keys: [
                    (api_key::PRODUCE, 12),
                    (api_key::METADATA, 12),
                    (api_key::API_VERSIONS, 3),
                ]
                .map(|(api_key, max_version)| ApiVersion {
                    api_key,
                    min_version: 0,
                    max_version,
                })
                .to_vec(),
                throttle_time_ms: 0,
            };
            encode_response::<ApiVersionsRequest>(&resp, version, corr)
        } else {
            assert_ne!(key, api_key::INIT_PRODUCER_ID, "never asked");
            respond(&f, &mut h.next_offset)
        };
        h.feed(a);
    }
    h
}

#[test]
fn without_idempotence_a_broker_need_not_serve_init_producer_id() {
    let h = to_a_broker_without_init_producer_id(false);
    assert_eq!(harness::deliveries(&h.events).len(), 1, "{:?}", h.events);
    let idempotent = to_a_broker_without_init_producer_id(true);
    assert!(harness::deliveries(&idempotent.events).is_empty());
    assert!(
        idempotent.events.iter().any(|e| matches!(
            e,
            Event::Fatal(kprod_core::FatalError::UnsupportedVersions(
                "InitProducerId"
            ))
        )),
        "{:?}",
        idempotent.events
    );
}

/// From a review of the non-default modes: under acks=1 a KAFKA_STORAGE_ERROR may come after
/// the append (a log flushed every `log.flush.interval.messages` fails its flush after
/// appending, and a follower may hold the batch), so the attempt is possibly persisted: the
/// record fails `PossiblyPersisted` at its delivery timeout, not `NotPersisted` while it is
/// in the log.
#[test]
fn acks_1_storage_error_may_follow_the_append() {
    let mut n = Net::new(ProducerConfig {
        delivery_timeout: Duration::from_secs(3),
        ..cfg_off(1)
    });
    n.send("a");
    let mut first = true;
    let mut fate = |_: &str| Fate::Answer;
    let mut act = |_: &str, _| {
        if std::mem::replace(&mut first, false) {
            Act::AppendThen(ErrorCode::KafkaStorageError)
        } else {
            Act::Refuse(ErrorCode::KafkaStorageError)
        }
    };
    n.rounds(40, Duration::from_millis(200), &mut fate, &mut act);
    assert_eq!(n.p.pending_records(), 0);
    assert_eq!(n.log_values(0), ["a"], "appended by the first attempt");
    n.check_truthful();
}

/// From a review of the non-default modes: a connection that carried acks=0 requests has
/// nothing awaiting an answer, so it looked idle and took the next Metadata request first;
/// behind a writer backlog (up to `buffer.memory`) that request timed out, and the close
/// threw away records already reported sent. A ready connection without acks=0 traffic (here
/// the bootstrap one) is taken instead.
#[test]
fn acks_0_metadata_goes_on_a_connection_without_a_produce_backlog() {
    let mut n = Net::new(cfg_off(0));
    n.send("a");
    n.run(&mut |_| Fate::Answer, &mut |_, _| Act::Ok);
    assert_eq!(n.log_values(0), ["a"]);
    assert!(n.conns.len() >= 2, "a bootstrap and a node connection");
    n.p.send(n.now, Record::new("t2", "b")).unwrap();
    n.drain();
    let (conn, f) = n.next_frame().expect("a Metadata request for t2");
    assert_eq!(api_of(&f).0, api_key::METADATA);
    assert_eq!(conn, ConnId(0), "on the bootstrap connection");
}
