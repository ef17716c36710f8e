//! How to test your own code around kprod, deterministically, from a plain `#[test]`.
//!
//! kprod-core's `Producer` does no I/O and reads no clock, so the code an application writes
//! around it can be tested against the very producer that ships, a broker model, and an
//! in-memory network, with faults chosen by a seed. No sockets, no sleeps, no flakiness: the
//! same seed replays the same run, event for event, and a failing seed is a reproducer.
//!
//! The harness is [`kprod_model::sim::Sim`] (add `kprod-model` as a dev-dependency):
//!
//! - `Sim::new(cluster, config)` builds a producer against a [`Cluster`] (the broker model:
//!   idempotent dedup, sequence and epoch rules of a chosen broker generation);
//! - `sim.send(record)` hands a record to the producer and carries out its outputs;
//! - `sim.step()` lets every broker process its waiting requests and delivers every response;
//! - faults: `sim.disconnect(conn, n)` lets the broker process `n` waiting requests, then
//!   breaks the connection, so their responses are lost; `link.blackhole = true` drops every
//!   response on a link (the producer notices at `request.timeout.ms`); `sim.refuse` makes a
//!   node refuse connections;
//! - `sim.run(max_steps)` drives until every record has its outcome, jumping the virtual clock
//!   to the producer's next deadline whenever nothing else can happen;
//! - `sim.events` holds every [`Event`] the producer emitted, in order: feed them to your code.
//!
//! The code under test here is an [`Outbox`]: it turns orders into records and tracks each
//! order from the delivery events, knowing which failures are safe to resend.

use std::collections::BTreeMap;
use std::time::Duration;

use kprod_core::{Event, Persistence, ProducerConfig, Record, RecordId};
use kprod_model::broker::{BrokerMode, Cluster};
use kprod_model::sim::Sim;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;
const ORDERS: u32 = 200;
/// `Sim::run` panics if the records are not all resolved after this many rounds.
const MAX_STEPS: usize = 100_000;

// ---------------------------------------------------------------------------------------------
// The application code under test.

/// Where an order stands, as the application sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Order {
    /// Handed to the producer, no outcome yet.
    Sending,
    /// In the log at this partition and offset.
    Confirmed { partition: i32, offset: Option<i64> },
    /// Failed and certainly not in the log: safe to send again.
    Resend,
    /// Failed and possibly in the log: reconcile before sending again.
    Reconcile,
}

/// Turns orders into records and follows them through the producer's delivery events.
#[derive(Debug, Default)]
struct Outbox {
    orders: BTreeMap<u32, Order>,
    by_record: BTreeMap<RecordId, u32>,
    /// Events already applied.
    applied: usize,
}

impl Outbox {
    /// The record of `order`: keyed by customer, so one customer's orders stay in order.
    fn record(order: u32) -> Record {
        Record::new(TOPIC, format!("order-{order}")).with_key(format!("customer-{}", order % 7))
    }

    fn submit(&mut self, sim: &mut Sim, order: u32) {
        let id = sim.send(Self::record(order));
        self.by_record.insert(id, order);
        self.orders.insert(order, Order::Sending);
    }

    /// Applies the events emitted since the last call.
    fn apply(&mut self, events: &[Event]) {
        for e in &events[self.applied..] {
            match e {
                Event::Delivered(d) => {
                    for (id, offset) in d.records() {
                        let partition = d.partition;
                        self.resolve(id, Order::Confirmed { partition, offset });
                    }
                }
                Event::Failed { id, persisted, .. } => match persisted {
                    Persistence::NotPersisted => self.resolve(*id, Order::Resend),
                    Persistence::PossiblyPersisted => self.resolve(*id, Order::Reconcile),
                },
                _ => {}
            }
        }
        self.applied = events.len();
    }

    fn resolve(&mut self, id: RecordId, state: Order) {
        let order = self.by_record[&id];
        let previous = self.orders.insert(order, state);
        assert_eq!(
            previous,
            Some(Order::Sending),
            "order {order} resolved twice"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The simulation.

/// A small seeded generator (SplitMix64): the seed alone decides every fault.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// One run: orders submitted one by one while the network misbehaves as `seed` decides.
/// Returns the harness (the producer, the broker's logs, every event), the outbox, and how
/// many faults were injected.
fn simulate(seed: u64) -> (Sim, Outbox, u32) {
    let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092"]);
    cluster.create_topic(TOPIC, PARTITIONS, 1);
    let config = ProducerConfig {
        linger: Duration::ZERO,
        request_timeout: Duration::from_millis(100),
        retry_backoff: Duration::from_millis(10),
        reconnect_backoff: Duration::from_millis(10),
        ..ProducerConfig::default()
    };
    let mut sim = Sim::new(cluster, config);
    let mut outbox = Outbox::default();
    let mut rng = Rng(seed);
    let mut faults = 0;
    for order in 0..ORDERS {
        outbox.submit(&mut sim, order);
        let conns: Vec<_> = sim.links.keys().copied().collect();
        match rng.below(10) {
            // The broker handles some of the waiting requests, then the connection breaks:
            // their responses are lost, and the producer must resend without duplicating.
            0 if !conns.is_empty() => {
                let conn = conns[rng.below(conns.len() as u64) as usize];
                sim.disconnect(conn, rng.below(3) as usize);
                faults += 1;
            }
            // Responses on a link vanish; the producer gives up at request.timeout.ms.
            1 if !conns.is_empty() => {
                let conn = conns[rng.below(conns.len() as u64) as usize];
                let link = sim.links.get_mut(&conn).expect("listed");
                faults += u32::from(!link.blackhole);
                link.blackhole = true;
            }
            // Requests pile up unanswered for a while.
            2 | 3 => {}
            _ => {
                sim.step();
            }
        }
        // Virtual time passes: request timeouts and reconnect backoffs come due.
        sim.advance(Duration::from_millis(rng.below(10)));
        outbox.apply(&sim.events);
    }
    sim.run(MAX_STEPS);
    outbox.apply(&sim.events);
    (sim, outbox, faults)
}

/// Lost responses and broken connections never cost an order nor duplicate one: every order
/// is confirmed exactly once, at an offset that holds it, and each customer's orders are in
/// the log in the order they were submitted.
#[test]
fn every_order_is_confirmed_once_despite_lost_responses() {
    let mut deduplicated = 0;
    for seed in 0..20 {
        let (sim, outbox, faults) = simulate(seed);
        assert!(faults > 0, "seed {seed}: no fault was injected");
        for (order, state) in &outbox.orders {
            let Order::Confirmed {
                partition,
                offset: Some(offset),
            } = state
            else {
                panic!("seed {seed}: order {order} ended as {state:?}");
            };
            let log = &sim.cluster.partition(TOPIC, *partition).log;
            let value = log.get(*offset as usize).and_then(|r| r.value.clone());
            assert_eq!(
                value,
                Outbox::record(*order).value,
                "seed {seed}: order {order} confirmed at {partition}/{offset}"
            );
        }
        assert_eq!(outbox.orders.len(), ORDERS as usize);
        // No duplicates, send order kept, offsets truthful (the harness's own log check).
        for p in 0..PARTITIONS {
            sim.check_partition(TOPIC, p);
        }
        let logged: usize = (0..PARTITIONS)
            .map(|p| sim.cluster.partition(TOPIC, p).log.len())
            .sum();
        assert_eq!(logged, ORDERS as usize, "seed {seed}: each order once");
        deduplicated += sim.cluster.stats.deduplicated;
    }
    // The faults bit: some batch was resent after its response was lost, and the broker
    // recognised the copy.
    assert!(deduplicated > 0, "no resend was ever deduplicated");
}

/// A seed is a reproducer: the same seed gives the same events, in the same order.
#[test]
fn the_same_seed_replays_the_same_run() {
    let (a, _, faults_a) = simulate(7);
    let (b, _, faults_b) = simulate(7);
    assert_eq!(faults_a, faults_b);
    assert_eq!(a.events, b.events);
    assert_eq!(a.transmitted, b.transmitted);
    let (c, _, _) = simulate(8);
    assert_ne!(a.transmitted, c.transmitted, "another seed, another run");
}

/// The failure path: a broker that refuses every connection. Nothing was ever written, so
/// every order fails as not persisted once `delivery.timeout.ms` passes (virtual time: the
/// test takes no time), and the outbox marks each one safe to resend.
#[test]
fn an_unreachable_broker_makes_every_order_safe_to_resend() {
    let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092"]);
    cluster.create_topic(TOPIC, PARTITIONS, 1);
    let mut sim = Sim::new(cluster, ProducerConfig::default());
    sim.refuse.insert(1);
    let mut outbox = Outbox::default();
    for order in 0..20 {
        outbox.submit(&mut sim, order);
    }
    sim.run(MAX_STEPS);
    outbox.apply(&sim.events);
    assert_eq!(outbox.orders.len(), 20);
    assert!(
        outbox.orders.values().all(|o| *o == Order::Resend),
        "{:?}",
        outbox.orders
    );
    assert!(sim.connects > 1, "the producer kept trying to connect");
    assert!(sim.cluster.partition(TOPIC, 0).log.is_empty());
}
