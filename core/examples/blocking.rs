//! A runtime-free driver: kprod-core over `std::net::TcpStream`s in non-blocking mode, turned
//! by a plain poll loop on one thread. No async runtime, no dependency beyond kprod-core and
//! `bytes`.
//!
//! ```text
//! cargo run -p kprod-core --example blocking -- BOOTSTRAP TOPIC [TICKS [BURSTS [BURST_SIZE]]]
//! ```
//!
//! It sends a seed-like load to `TOPIC` (which must have 3 partitions): a ticker sends one
//! record every millisecond, round-robin over the partitions, and `BURSTS` times during the
//! ticker a burst of `BURST_SIZE` records is sent at once. It waits for every delivery event,
//! closes the producer and prints one verdict line; it exits with 1 unless every record was
//! delivered, at increasing offsets per partition and stream.
//!
//! The integration test `tests/tests/blocking_driver.rs` compiles this very file as a module
//! (`#[path]`) and checks [`run`]'s report against the topic read back by another client.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use kprod_core::{ConnId, Event, Output, Persistence, Producer, ProducerConfig, Record, RecordId};

/// The partitions records go to (explicitly, round-robin).
pub const PARTITIONS: i32 = 3;
/// How long the loop sleeps when no socket moved and no deadline is due.
const IDLE: Duration = Duration::from_millis(1);
/// How long a (blocking) connect may take: `std` has no non-blocking connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The load: `ticks` records one `period` apart, and `bursts` bursts of `burst_size` records.
#[derive(Debug, Clone)]
pub struct Plan {
    pub topic: String,
    pub ticks: u64,
    pub period: Duration,
    pub bursts: u32,
    pub burst_size: u64,
}

/// One record: stream 0 is the ticker, stream `1 + b` burst `b`; `seq` counts within a stream.
/// `outcome` is its `Delivered` or `Failed` event, `Err` if `send` refused it, `None` if it
/// never resolved.
#[derive(Debug, Clone)]
pub struct Sent {
    pub stream: u32,
    pub seq: u64,
    pub partition: i32,
    pub value_len: usize,
    pub outcome: Option<Result<Event, String>>,
}

/// A socket and what is waiting to be written to it or handed to the producer.
struct Conn {
    stream: TcpStream,
    outbox: VecDeque<Bytes>,
    inbox: BytesMut,
}

/// The driver: the producer, its sockets, and the outcome of every accepted record.
struct Driver {
    producer: Producer,
    conns: HashMap<ConnId, Conn>,
    wait: Option<Instant>,
    outcomes: HashMap<RecordId, Event>,
}

fn open(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = ErrorKind::NotFound.into();
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_nonblocking(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Driver {
    /// Carries out every output until the producer waits (the drain rule).
    fn drain(&mut self) {
        loop {
            match self.producer.poll_output() {
                Output::Connect { conn, addr } => match open(&addr) {
                    Ok(stream) => {
                        let (outbox, inbox) = (VecDeque::new(), BytesMut::new());
                        self.conns.insert(
                            conn,
                            Conn {
                                stream,
                                outbox,
                                inbox,
                            },
                        );
                        self.producer.handle_connected(Instant::now(), conn);
                    }
                    Err(_) => self.producer.handle_connect_failed(Instant::now(), conn),
                },
                Output::Transmit { conn, bytes } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.outbox.push_back(bytes);
                    }
                }
                Output::Close { conn } => drop(self.conns.remove(&conn)),
                Output::Event(e @ (Event::Delivered { id, .. } | Event::Failed { id, .. })) => {
                    self.outcomes.insert(id, e);
                }
                Output::Event(_) => {} // Fatal (every record also fails) and diagnostics
                Output::SaslInput { .. } => unreachable!("this driver configures no SASL"),
                Output::Wait { until } => {
                    self.wait = until;
                    return;
                }
            }
        }
    }

    /// Writes what each socket takes and hands what it read to the producer. Returns whether
    /// any byte moved.
    fn pump(&mut self) -> bool {
        let mut moved = false;
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            // An earlier connection's input may have closed this one.
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let (mut alive, mut read) = (true, false);
            while let Some(front) = c.outbox.front_mut() {
                match c.stream.write(front) {
                    Ok(n) if n == front.len() => drop(c.outbox.pop_front()),
                    Ok(n) => front.advance(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        alive = false;
                        break;
                    }
                }
                moved = true;
            }
            let mut chunk = [0u8; 64 * 1024];
            while alive {
                match c.stream.read(&mut chunk) {
                    Ok(0) => alive = false,
                    Ok(n) => {
                        read = true;
                        c.inbox.extend_from_slice(&chunk[..n]);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => alive = false,
                }
            }
            if read {
                moved = true;
                self.producer.handle_read(Instant::now(), id, &mut c.inbox);
            }
            if !alive {
                self.conns.remove(&id);
                self.producer.handle_disconnected(Instant::now(), id);
            }
            self.drain();
        }
        moved
    }

    /// One turn of the loop: sockets, then the producer's deadline, else a short idle sleep
    /// (never past the deadline nor `not_after`).
    fn turn(&mut self, not_after: Option<Instant>) {
        if self.pump() {
            return;
        }
        let now = Instant::now();
        if self.wait.is_some_and(|t| t <= now) {
            self.producer.handle_timeout(now);
            return self.drain();
        }
        let wake = [self.wait, not_after].into_iter().flatten().min();
        let idle = wake.map_or(IDLE, |t| t.saturating_duration_since(now).min(IDLE));
        std::thread::sleep(idle);
    }

    /// Sends a record, turning the loop while `buffer.memory` is full.
    fn send(&mut self, mut record: Record) -> Result<RecordId, String> {
        loop {
            match self.producer.send(Instant::now(), record) {
                Ok(id) => {
                    self.drain();
                    return Ok(id);
                }
                Err(kprod_core::SendError::QueueFull(r)) => {
                    record = r;
                    self.turn(None);
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Runs `plan` against `bootstrap` and returns every record with its outcome (`None`: no
/// outcome within `resolve_timeout` of the last send). `value(stream, seq)` is each value.
pub fn run(
    bootstrap: &str,
    plan: &Plan,
    resolve_timeout: Duration,
    value: impl Fn(u32, u64) -> Vec<u8>,
) -> Vec<Sent> {
    let config = ProducerConfig {
        bootstrap_servers: vec![bootstrap.to_owned()],
        client_id: Some("kprod-blocking".to_owned()),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(config, Instant::now()).expect("valid config");
    let mut d = Driver {
        producer,
        conns: HashMap::new(),
        wait: None,
        outcomes: HashMap::new(),
    };
    let mut sent: Vec<(Option<RecordId>, Sent)> = Vec::new();
    let mut emit = |d: &mut Driver, stream: u32, seq: u64| {
        let partition = (seq % PARTITIONS as u64) as i32;
        let v = value(stream, seq);
        let value_len = v.len();
        // The core has no clock: the application stamps its records.
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |t| t.as_millis());
        let record = Record::new(plan.topic.clone(), v).with_partition(partition);
        let (id, outcome) = match d.send(record.with_timestamp(ms as i64)) {
            Ok(id) => (Some(id), None),
            Err(e) => (None, Some(Err(e))),
        };
        sent.push((
            id,
            Sent {
                stream,
                seq,
                partition,
                value_len,
                outcome,
            },
        ));
    };
    let start = Instant::now();
    for tick in 0..plan.ticks {
        let due = start + plan.period * tick as u32;
        while Instant::now() < due {
            d.turn(Some(due));
        }
        for b in 0..plan.bursts {
            if tick == plan.ticks * u64::from(b + 1) / u64::from(plan.bursts + 1) {
                (0..plan.burst_size).for_each(|seq| emit(&mut d, 1 + b, seq));
            }
        }
        emit(&mut d, 0, tick);
    }
    // Close sends what is buffered; the producer is closed once every record resolved.
    let deadline = Instant::now() + resolve_timeout;
    d.producer.close(Instant::now());
    d.drain();
    while !d.producer.is_closed() && d.producer.fatal_error().is_none() {
        if Instant::now() >= deadline {
            break;
        }
        d.turn(Some(deadline));
    }
    let mut sent: Vec<Sent> = sent
        .into_iter()
        .map(|(id, s)| Sent {
            outcome: s
                .outcome
                .or_else(|| id.and_then(|id| d.outcomes.remove(&id)).map(Ok)),
            ..s
        })
        .collect();
    sent.sort_by_key(|s| (s.stream, s.seq));
    sent
}

/// Counts, and whether the delivered offsets increase per partition and stream.
pub fn verdict(sent: &[Sent]) -> (String, bool) {
    let (mut delivered, mut not_persisted, mut possibly, mut refused, mut open) = (0, 0, 0, 0, 0);
    let mut last: BTreeMap<(i32, u32), i64> = BTreeMap::new();
    let mut in_order = true;
    for s in sent {
        match &s.outcome {
            Some(Ok(Event::Delivered {
                partition, offset, ..
            })) => {
                delivered += 1;
                if let Some(o) = *offset {
                    let prev = last.insert((*partition, s.stream), o);
                    in_order &= prev.is_none_or(|p| p < o) && *partition == s.partition;
                }
            }
            Some(Ok(Event::Failed { persisted, .. })) => match persisted {
                Persistence::NotPersisted => not_persisted += 1,
                Persistence::PossiblyPersisted => possibly += 1,
            },
            Some(Ok(_)) => unreachable!("only final events are kept"),
            Some(Err(_)) => refused += 1,
            None => open += 1,
        }
    }
    let ok = delivered == sent.len() && in_order;
    let line = format!(
        "verdict: {} sent, {delivered} delivered, failed {not_persisted} not persisted + \
         {possibly} possibly persisted, {refused} refused, {open} unresolved, offsets in \
         order: {in_order} => {}",
        sent.len(),
        if ok { "OK" } else { "FAILED" }
    );
    (line, ok)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| args.get(i).map_or(default, |a| a.parse().expect("count"));
    let [bootstrap, topic] = [0, 1].map(|i| args.get(i).cloned());
    let (Some(bootstrap), Some(topic)) = (bootstrap, topic) else {
        eprintln!("usage: blocking BOOTSTRAP TOPIC [TICKS [BURSTS [BURST_SIZE]]]");
        std::process::exit(2);
    };
    let plan = Plan {
        topic,
        ticks: num(2, 2_000),
        period: Duration::from_millis(1),
        bursts: num(3, 3) as u32,
        burst_size: num(4, 10_000),
    };
    let started = Instant::now();
    let sent = run(
        &bootstrap,
        &plan,
        Duration::from_secs(120),
        |stream, seq| format!("blocking {stream} {seq}").into_bytes(),
    );
    let (line, ok) = verdict(&sent);
    println!("{line} (in {:.2?})", started.elapsed());
    std::process::exit(if ok { 0 } else { 1 });
}
