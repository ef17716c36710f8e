//! When metadata is asked for, in 5 ms steps against a responder that answers every topic
//! named: the backoff that grows over answers telling nothing new (an offline partition)
//! holds back neither a new topic nor a leader move (both found by a review of the change
//! that grew it), a `metadata.max.age.ms` of 0 does not make the producer ask without end,
//! and thousands of topics used once and left idle leave the requests (and the per-drain
//! walks, which look only at topics with records waiting for metadata).

mod harness;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use harness::{api_of, deliveries, parse_request, respond};
use kprod_core::protocol::metadata::{MetadataRequest, MetadataResponse};
use kprod_core::protocol::{api_key, decode_response, encode_response, Message};
use kprod_core::{ConnId, Event, Output, Producer, ProducerConfig, Record};

fn requested_topics(frame: &Bytes) -> Vec<String> {
    let (_, version, _, body) = parse_request(frame);
    let req = MetadataRequest::decode_exact(version, body).unwrap();
    (req.topics.unwrap().into_iter())
        .filter_map(|t| t.name)
        .collect()
}

struct Sim {
    p: Producer,
    start: Instant,
    now: Instant,
    conns: BTreeMap<ConnId, BytesMut>,
    events: Vec<Event>,
    next_offset: i64,
    /// (time since start, topics) of every metadata request answered.
    asked: Vec<(Duration, Vec<String>)>,
    addr_of: BTreeMap<ConnId, String>,
    /// Produce requests to this address are refused NOT_LEADER_OR_FOLLOWER (no hint).
    refuse_at: Option<String>,
    refusals: Vec<Duration>,
    /// Connects to this address fail.
    unreachable: Option<String>,
    /// (time since start, address) of every connect.
    connects: Vec<(Duration, String)>,
}

impl Sim {
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
            start: now,
            now,
            conns: BTreeMap::new(),
            events: Vec::new(),
            next_offset: 0,
            asked: Vec::new(),
            addr_of: BTreeMap::new(),
            refuse_at: None,
            refusals: Vec::new(),
            unreachable: None,
            connects: Vec::new(),
        }
    }
    fn drain(&mut self) {
        loop {
            match self.p.poll_output() {
                Output::Wait { .. } => return,
                Output::Connect { conn, addr } => {
                    self.connects
                        .push((self.now - self.start, addr.to_string()));
                    if self.unreachable.as_deref() == Some(&*addr) {
                        self.p.handle_connect_failed(self.now, conn);
                        continue;
                    }
                    self.addr_of.insert(conn, addr.to_string());
                    self.conns.insert(conn, BytesMut::new());
                    self.p.handle_connected(self.now, conn);
                }
                Output::Transmit { conn, bytes } => {
                    self.conns.get_mut(&conn).unwrap().extend_from_slice(&bytes)
                }
                Output::Close { conn, .. } => {
                    self.conns.remove(&conn);
                }
                Output::Event(e) => self.events.push(e),
                Output::SaslInput { .. } => unreachable!(),
            }
        }
    }
    fn next_frame(&mut self) -> Option<(ConnId, Bytes)> {
        self.conns.iter_mut().find_map(|(&c, buf)| {
            if buf.len() < 4 {
                return None;
            }
            let len = 4 + i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            (buf.len() >= len).then(|| (c, buf.split_to(len).freeze()))
        })
    }
    /// Answers everything (metadata rewritten by `meta`), then moves time by `step`.
    fn step(&mut self, step: Duration, meta: &dyn Fn(&mut MetadataResponse)) {
        self.drain();
        let mut answered = 0;
        while let Some((conn, f)) = self.next_frame() {
            answered += 1;
            assert!(
                answered < 10_000,
                "still asked after 10,000 answers at one instant"
            );
            let (key, version, corr) = api_of(&f);
            let a = if key == api_key::METADATA {
                let a = respond(&f, &mut self.next_offset);
                let (_, mut m) = decode_response::<MetadataRequest>(version, a.slice(4..)).unwrap();
                let names = requested_topics(&f);
                let template = m.topics[0].clone();
                m.topics = (names.iter())
                    .map(|n| {
                        let mut t = template.clone();
                        t.name = Some(n.clone());
                        t
                    })
                    .collect();
                self.asked.push((self.now - self.start, names));
                meta(&mut m);
                encode_response::<MetadataRequest>(&m, version, corr)
            } else if key == api_key::PRODUCE
                && self.refuse_at.is_some()
                && self.addr_of.get(&conn) == self.refuse_at.as_ref()
            {
                self.refusals.push(self.now - self.start);
                harness::produce_error(&f, kprod_core::protocol::ErrorCode::NotLeaderOrFollower)
            } else {
                respond(&f, &mut self.next_offset)
            };
            let mut buf = BytesMut::from(&a[..]);
            self.p.handle_read(self.now, conn, &mut buf);
            self.drain();
        }
        self.now += step;
        self.p.handle_timeout(self.now);
        self.drain();
    }
    fn run_for(&mut self, d: Duration, step: Duration, meta: &dyn Fn(&mut MetadataResponse)) {
        let end = self.now + d;
        while self.now < end {
            self.step(step, meta);
        }
    }
}

/// Topic `bench` with two partitions: 0 led by node 1, 1 without a leader (an offline
/// partition, for as long as the test lasts).
fn one_offline(m: &mut MetadataResponse) {
    for t in &mut m.topics {
        let mut p1 = t.partitions[0].clone();
        p1.partition_index = 1;
        p1.leader_id = -1;
        if t.name.as_deref() == Some("bench") {
            t.partitions.push(p1);
        }
    }
}

/// Steps of 5 ms; record a delivered to partition 0 while partition 1 stays offline for 20 s
/// (the metadata backoff grown to `retry.backoff.max.ms`), then up to the step right after
/// the next metadata answer: the worst moment for something new to need metadata.
fn grown_backoff() -> Sim {
    let mut s = Sim::new(|_| {});
    s.p.send(s.now, Record::new("bench", "a").with_partition(0))
        .unwrap();
    s.run_for(Duration::from_secs(20), STEP, &one_offline);
    assert_eq!(s.p.pending_records(), 0);
    let n = s.asked.len();
    while s.asked.len() == n {
        s.step(STEP, &one_offline);
    }
    s
}

const STEP: Duration = Duration::from_millis(5);

/// A record for a brand-new topic, sent while another topic's offline partition has grown
/// the metadata backoff to `retry.backoff.max.ms`: the request naming it goes no later than
/// `retry.backoff.ms` after the last answer (the Java client asks at once:
/// `requestUpdateForNewTopics` zeroes `lastRefreshMs` and the equivalent-answer count). With
/// the first version of the grown backoff: asked after 995 ms.
#[test]
fn a_new_topic_is_not_held_by_the_grown_backoff() {
    let mut s = grown_backoff();
    let sent_at = s.now - s.start;
    let id = s.p.send(s.now, Record::new("fresh", "b")).unwrap();
    let mut asked_at = None;
    let mut delivered_at = None;
    for _ in 0..1000 {
        s.step(STEP, &one_offline);
        if asked_at.is_none() {
            asked_at = (s.asked.iter())
                .find(|(_, names)| names.iter().any(|n| n == "fresh"))
                .map(|(t, _)| *t);
        }
        if delivered_at.is_none() && deliveries(&s.events).iter().any(|d| d.0 == id) {
            delivered_at = Some(s.now - s.start);
        }
    }
    let asked_after = asked_at.expect("asked") - sent_at;
    let delivered_after = delivered_at.expect("delivered") - sent_at;
    eprintln!("asked after {asked_after:?}, delivered after {delivered_after:?}");
    assert!(
        asked_after <= Duration::from_millis(110),
        "the new topic's metadata was asked for {asked_after:?} after its first record \
         (delivered after {delivered_after:?})"
    );
}

/// Node 2 listed at `host` (port as node 1's), leading partition 0 of every topic (at
/// `epoch`, if given).
fn partition_0_led_by_node_2(m: &mut MetadataResponse, host: &str, epoch: Option<i32>) {
    let mut b2 = m.brokers[0].clone();
    b2.node_id = 2;
    b2.host = host.into();
    m.brokers.push(b2);
    for t in &mut m.topics {
        t.partitions[0].leader_id = 2;
        if let Some(e) = epoch {
            t.partitions[0].leader_epoch = e;
        }
    }
}

/// Partition 0 of `bench` moved to node 2 (`other`), partition 1 offline.
fn moved_one_offline(m: &mut MetadataResponse) {
    one_offline(m);
    partition_0_led_by_node_2(m, "other", Some(1));
}

/// A leader move refused NOT_LEADER_OR_FOLLOWER (no KIP-951 hint) while another partition's
/// offline state has grown the metadata backoff: the refusal is news, so the record reaches
/// the new leader about `retry.backoff.ms` after it (the metadata answers show the move as
/// soon as they are asked for). With the first version of the grown backoff: 1 s.
#[test]
fn a_not_leader_refusal_does_not_wait_for_the_grown_backoff() {
    let mut s = grown_backoff();
    s.refuse_at = Some("bench:9092".into());
    let id =
        s.p.send(s.now, Record::new("bench", "b").with_partition(0))
            .unwrap();
    let mut delivered_at = None;
    for _ in 0..1000 {
        s.step(STEP, &moved_one_offline);
        if delivered_at.is_none() && deliveries(&s.events).iter().any(|d| d.0 == id) {
            delivered_at = Some(s.now - s.start);
        }
    }
    let refused = s.refusals[0];
    let took = delivered_at.expect("delivered") - refused;
    eprintln!(
        "refusals {:?}, delivered {took:?} after the refusal",
        s.refusals.len()
    );
    assert!(
        took <= Duration::from_millis(250),
        "delivered {took:?} after the refusal"
    );
}

/// `metadata.max.age.ms` 0 (valid, as in Java): an answer stays fresh for `retry.backoff.ms`
/// at least. Before, the producer asked again the moment each answer came: about 10,000
/// requests a second against Tansu with nothing to send, and without end at a clock that
/// does not move (a review probe's finding).
#[test]
fn a_metadata_max_age_of_zero_does_not_make_the_producer_ask_without_end() {
    let mut s = Sim::new(|c| c.metadata_max_age = Duration::ZERO);
    s.p.send(s.now, Record::new("bench", "a")).unwrap();
    // Answered at one instant: one request, then none until time passes.
    s.step(Duration::ZERO, &|_| {});
    s.step(Duration::ZERO, &|_| {});
    assert_eq!(s.asked.len(), 1, "asked again at the same instant");
    assert_eq!(s.p.pending_records(), 0);
    // Two seconds: one request per `retry.backoff.ms` (100 ms), Java's floor.
    s.run_for(Duration::from_secs(2), Duration::from_millis(5), &|_| {});
    assert!(
        (18..=22).contains(&s.asked.len()),
        "{} requests in 2 s",
        s.asked.len()
    );
}

/// Topics used once and left idle (`metadata.max.idle.ms`): after 3,000 of them the requests
/// name only the topic still in use, and records to it are delivered as before. Each drain
/// used to walk every topic ever used (its records waiting for metadata, their deadlines),
/// so a producer writing to ever-new topic names got slower for its whole life (a probe:
/// 4.4 µs per record with none idle, 83 µs with 20,000; now the same), and each kept the
/// room its queues had grown (3.3 kB of RSS per one-partition topic; now 1.9 kB).
#[test]
fn topics_left_idle_leave_the_requests() {
    let mut s = Sim::new(|c| {
        c.metadata_max_idle = Some(Duration::from_secs(5));
        c.metadata_max_age = Duration::from_secs(1);
    });
    let mut churned = 0;
    while churned < 3_000 {
        for _ in 0..100 {
            s.p.send(s.now, Record::new(format!("churn-{churned}"), "x"))
                .unwrap();
            churned += 1;
        }
        s.p.send(s.now, Record::new("bench", "b")).unwrap();
        s.run_for(Duration::from_secs(1), Duration::from_millis(250), &|_| {});
    }
    s.run_for(Duration::from_secs(15), Duration::from_millis(250), &|_| {});
    assert_eq!(s.p.pending_records(), 0, "every record delivered");
    // Every topic, `bench` too (nothing sent to it for 15 s).
    assert_eq!(s.p.metrics().idle_topics, 3_001);
    // Idle topics have no rows in the metrics (a review finding: each snapshot listed every
    // partition of every topic ever used, a walk and a sort under the adapter's lock that
    // grew with the producer's age).
    assert!(s.p.metrics().partitions.is_empty());
    s.p.send(s.now, Record::new("bench", "steady")).unwrap();
    s.run_for(Duration::from_secs(2), Duration::from_millis(250), &|_| {});
    assert_eq!(s.p.pending_records(), 0);
    let rows = s.p.metrics().partitions;
    assert!(
        !rows.is_empty() && rows.iter().all(|r| &*r.topic == "bench"),
        "the topic in use is listed again: {rows:?}"
    );
    let (_, last) = s.asked.last().unwrap();
    assert_eq!(
        last,
        &["bench".to_owned()],
        "only the topic in use is asked about"
    );
}

/// A producer adding topics one by one (a record to a new topic every 20 ms, 200 topics):
/// each metadata request names the topics no answer has described yet, not every topic in
/// use, as Java's partial update for new topics (`requestUpdateForNewTopics`). Before (a
/// review finding, 2026-12-06), the requests named 1, 2, ..., 200 topics: 20,100 names, and
/// as many described in the answers, quadratic in the number of topics. The periodic refresh
/// still names them all.
#[test]
fn new_topics_are_asked_about_alone() {
    let mut s = Sim::new(|c| c.metadata_max_age = Duration::from_secs(10));
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(s.p.send(s.now, Record::new(format!("t{i}"), "v")).unwrap());
        s.run_for(Duration::from_millis(20), STEP, &|_| {});
    }
    s.run_for(Duration::from_millis(200), STEP, &|_| {});
    let delivered = deliveries(&s.events);
    assert!(
        ids.iter().all(|id| delivered.iter().any(|d| d.0 == *id)),
        "every record delivered"
    );
    let names: usize = s.asked.iter().map(|(_, n)| n.len()).sum();
    eprintln!("{names} topic names asked in {} requests", s.asked.len());
    assert!(
        names <= 600,
        "{names} topic names asked in {} requests",
        s.asked.len()
    );
    // The periodic refresh (10 s here) names every topic in use.
    s.run_for(Duration::from_secs(10), Duration::from_millis(50), &|_| {});
    let last = &s.asked.last().expect("asked").1;
    assert_eq!(last.len(), 200, "the periodic refresh names them all");
}

/// A record waits for a topic that does not exist (auto-creation off) while another topic is
/// in use: the answers about the missing topic alone (partial, about once a second) kept
/// postponing the periodic refresh, so the topic in use was never asked about again and its
/// added partitions went unseen (a review finding, 2026-12-07). The periodic refresh now
/// counts from the last answer naming every topic, and still comes.
#[test]
fn asking_about_a_missing_topic_does_not_postpone_the_periodic_refresh() {
    let mut s = Sim::new(|c| {
        c.metadata_max_age = Duration::from_secs(2);
        c.allow_auto_topic_creation = false;
    });
    let first = s.p.send(s.now, Record::new("bench", "v")).unwrap();
    s.run_for(Duration::from_millis(100), STEP, &|_| {});
    assert!(deliveries(&s.events).iter().any(|d| d.0 == first));
    s.p.send(s.now, Record::new("missing", "v")).unwrap();
    let missing = |m: &mut MetadataResponse| {
        for t in &mut m.topics {
            if t.name.as_deref() == Some("missing") {
                t.error_code = 3; // UNKNOWN_TOPIC_OR_PARTITION
                t.partitions.clear();
            }
        }
    };
    let asked_from = s.asked.len();
    s.run_for(Duration::from_secs(7), Duration::from_millis(50), &missing);
    let later = &s.asked[asked_from..];
    assert!(
        later.iter().filter(|(_, n)| n == &["missing"]).count() >= 3,
        "the missing topic is asked about again and again: {later:?}"
    );
    let full: Vec<Duration> = (later.iter())
        .filter(|(_, n)| n.iter().any(|t| t == "bench"))
        .map(|(at, _)| *at)
        .collect();
    // Every 2 s (the periodic refresh), give or take a backoff.
    assert!(full.len() >= 2, "the topic in use asked about at {full:?}");
}

/// Metadata v9 (Kafka 2.4–2.7: leader epochs, no topic ids): `bench` deleted and created
/// again between two answers, its partition now led by node 2 at epoch 0 where node 1 led it
/// at epoch 5, and no answer ever said the topic was gone. Node 1, which still knows the old
/// topic, refuses NOT_LEADER_OR_FOLLOWER. Every answer's epoch looked stale beside 5, the
/// partition kept waiting for a leader, and its records failed at their delivery timeout (a
/// review finding, 2026-12-07). Lower epochs that answers keep reporting, without a break,
/// for `retry.backoff.max.ms` after the leader refused are believed, as after an answer
/// that said the topic was gone.
#[test]
fn a_topic_created_again_without_topic_ids_is_followed_to_its_new_leader() {
    let mut s = Sim::new(|c| c.max_versions.metadata = Some(9));
    let epoch5 = |m: &mut MetadataResponse| {
        for t in &mut m.topics {
            t.partitions[0].leader_epoch = 5;
        }
    };
    let first = s.p.send(s.now, Record::new("bench", "a")).unwrap();
    s.run_for(Duration::from_millis(200), STEP, &epoch5);
    assert!(deliveries(&s.events).iter().any(|d| d.0 == first));
    let created_again = |m: &mut MetadataResponse| partition_0_led_by_node_2(m, "other", Some(0));
    s.refuse_at = Some("bench:9092".into());
    let second = s.p.send(s.now, Record::new("bench", "b")).unwrap();
    s.run_for(
        Duration::from_secs(10),
        Duration::from_millis(20),
        &created_again,
    );
    assert!(!s.refusals.is_empty(), "node 1 refused");
    assert!(
        deliveries(&s.events).iter().any(|d| d.0 == second),
        "delivered by the new leader: {:?}",
        s.events.last()
    );
}

/// A leader whose connects fail (its backoff grown to `retry.backoff.max.ms`) is listed at a
/// new address: the new address is dialled as soon as the answer names it, not after the
/// backoff earned at the old one (a review finding, 2026-12-07: up to a second later).
#[test]
fn a_broker_at_a_new_address_is_dialled_without_the_old_addresses_backoff() {
    let mut s = Sim::new(|_| {});
    let led_by_2 = |host: &'static str| {
        move |m: &mut MetadataResponse| partition_0_led_by_node_2(m, host, None)
    };
    s.unreachable = Some("old:9092".into());
    s.p.send(s.now, Record::new("bench", "a")).unwrap();
    s.run_for(Duration::from_secs(5), STEP, &led_by_2("old"));
    let failed = s.connects.iter().filter(|(_, a)| a == "old:9092").count();
    assert!(failed >= 4, "connects to the old address: {:?}", s.connects);
    let answers = s.asked.len();
    let mut moved_at = None;
    while moved_at.is_none() {
        assert!(s.now - s.start < Duration::from_secs(10), "never dialled");
        s.step(STEP, &led_by_2("new"));
        if s.asked.len() > answers {
            moved_at.get_or_insert(s.asked[answers].0);
        }
    }
    let moved_at = moved_at.unwrap();
    let dialled = (s.connects.iter())
        .find(|(_, a)| a == "new:9092")
        .map(|(at, _)| *at);
    assert_eq!(
        dialled,
        Some(moved_at),
        "the answer naming the new address came at {moved_at:?}"
    );
    s.run_for(Duration::from_millis(100), STEP, &led_by_2("new"));
    assert_eq!(s.p.pending_records(), 0, "delivered at the new address");
}
