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
//! `tests/tests/blocking_driver.rs` compiles this file as a module (`#[path]`) and checks
//! [`run`]'s report against the topic read back by another client.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use kprod_core::{
    ConnId, DeliveryError, Event, Output, Persistence, Producer, ProducerConfig, Record, RecordId,
};

/// The partitions records go to (explicitly, round-robin).
pub const PARTITIONS: i32 = 3;
/// The longest the loop sleeps when no socket moved and no deadline is due.
const IDLE: Duration = Duration::from_millis(1);

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
/// `outcome` is what its `Delivered` or `Failed` event said, `Err` if `send` refused it,
/// `None` if it never resolved.
#[derive(Debug, Clone)]
pub struct Sent {
    pub stream: u32,
    pub seq: u64,
    pub partition: i32,
    pub value_len: usize,
    pub outcome: Option<Result<Outcome, String>>,
}

/// A record's final outcome, from its batch's `Event::Delivered` or its `Event::Failed`.
#[derive(Debug, Clone)]
pub enum Outcome {
    Delivered {
        partition: i32,
        offset: Option<i64>,
    },
    Failed {
        error: DeliveryError,
        persisted: Persistence,
    },
}

/// A socket, the bytes waiting to be written to it, and the bytes read and not yet consumed.
struct Conn(TcpStream, VecDeque<Bytes>, BytesMut);

/// The driver: the producer, its sockets, and the outcome of every accepted record.
struct Driver {
    producer: Producer,
    conns: HashMap<ConnId, Conn>,
    wait: Option<Instant>,
    outcomes: HashMap<RecordId, Outcome>,
}

/// A blocking connect (std has no other), then non-blocking from there on.
fn open(addr: &str) -> std::io::Result<TcpStream> {
    let a = addr.to_socket_addrs()?.next().ok_or(ErrorKind::NotFound)?;
    let s = TcpStream::connect_timeout(&a, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

impl Driver {
    /// Carries out every output until the producer waits (the drain rule).
    fn drain(&mut self) {
        loop {
            let now = Instant::now();
            match self.producer.poll_output() {
                Output::Connect { conn, addr } => match open(&addr) {
                    Ok(s) => {
                        self.conns
                            .insert(conn, Conn(s, VecDeque::new(), BytesMut::new()));
                        self.producer.handle_connected(now, conn);
                    }
                    Err(_) => self.producer.handle_connect_failed(now, conn),
                },
                Output::Transmit { conn, bytes } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.1.push_back(bytes);
                    }
                }
                Output::Close { conn, flush } => {
                    // `flush`: what was handed over goes out first (under `acks=0` its records
                    // were already reported sent). Blocking, for at most five seconds.
                    if let Some(Conn(mut s, outbox, _)) = self.conns.remove(&conn) {
                        let end = now + Duration::from_secs(5);
                        let all: Vec<u8> = outbox.iter().flat_map(|b| b.iter().copied()).collect();
                        let mut rest = &all[..];
                        while flush && !rest.is_empty() {
                            let left = end.saturating_duration_since(Instant::now());
                            if left.is_zero()
                                || s.set_nonblocking(false).is_err()
                                || s.set_write_timeout(Some(left)).is_err()
                            {
                                break;
                            }
                            match s.write(rest) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => rest = &rest[n..],
                            }
                        }
                    }
                }
                Output::Event(Event::Delivered(d)) => {
                    for (id, offset) in d.records() {
                        let partition = d.partition;
                        self.outcomes
                            .insert(id, Outcome::Delivered { partition, offset });
                    }
                }
                Output::Event(Event::Failed {
                    id,
                    error,
                    persisted,
                    ..
                }) => {
                    self.outcomes
                        .insert(id, Outcome::Failed { error, persisted });
                }
                Output::Event(_) => {} // Fatal (every record also fails) and diagnostics
                Output::SaslInput { .. } => unreachable!("this driver configures no SASL"),
                Output::Wait { until } => return self.wait = until,
            }
        }
    }

    /// Writes what each socket takes, reads what it has, and hands the bytes to the producer.
    /// Returns whether any byte moved.
    fn pump(&mut self) -> bool {
        let mut moved = false;
        for id in self.conns.keys().copied().collect::<Vec<_>>() {
            // An earlier connection's input may have closed this one.
            let Some(Conn(stream, outbox, inbox)) = self.conns.get_mut(&id) else {
                continue;
            };
            let (mut alive, read_from) = (true, inbox.len());
            while let Some(front) = outbox.front_mut().filter(|_| alive) {
                match stream.write(front) {
                    Ok(n) if n == front.len() => drop(outbox.pop_front()),
                    Ok(n) => front.advance(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => alive = e.kind() == ErrorKind::Interrupted,
                }
                moved = true;
            }
            let mut chunk = [0u8; 64 * 1024];
            while alive {
                match stream.read(&mut chunk) {
                    Ok(0) => alive = false,
                    Ok(n) => inbox.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => alive = e.kind() == ErrorKind::Interrupted,
                }
            }
            if inbox.len() > read_from {
                moved = true;
                self.producer.handle_read(Instant::now(), id, inbox);
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
        std::thread::sleep(wake.map_or(IDLE, |t| t.saturating_duration_since(now).min(IDLE)));
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
    let (conns, outcomes) = (HashMap::new(), HashMap::new());
    let mut d = Driver {
        producer,
        conns,
        wait: None,
        outcomes,
    };
    let mut sent: Vec<(Option<RecordId>, Sent)> = Vec::new();
    let mut emit = |d: &mut Driver, stream: u32, seq: u64| {
        let (partition, v) = ((seq % PARTITIONS as u64) as i32, value(stream, seq));
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
        let s = Sent {
            stream,
            seq,
            partition,
            value_len,
            outcome,
        };
        sent.push((id, s));
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
    let mut sent: Vec<Sent> = (sent.into_iter())
        .map(|(id, s)| {
            let event = id.and_then(|id| d.outcomes.remove(&id));
            Sent {
                outcome: s.outcome.or(event.map(Ok)),
                ..s
            }
        })
        .collect();
    sent.sort_by_key(|s| (s.stream, s.seq));
    sent
}

/// One line of counts, and whether every record was delivered at increasing offsets per
/// partition and stream.
pub fn verdict(sent: &[Sent]) -> (String, bool) {
    let (mut delivered, mut failed, mut refused, mut open) = (0, 0, 0, 0);
    let mut last: BTreeMap<(i32, u32), i64> = BTreeMap::new();
    let mut in_order = true;
    for s in sent {
        match &s.outcome {
            Some(Ok(Outcome::Delivered { partition, offset })) => {
                delivered += 1;
                if let Some(o) = *offset {
                    let prev = last.insert((*partition, s.stream), o);
                    in_order &= prev.is_none_or(|p| p < o) && *partition == s.partition;
                }
            }
            Some(Ok(_)) => failed += 1,
            Some(Err(_)) => refused += 1,
            None => open += 1,
        }
    }
    let ok = delivered == sent.len() && in_order;
    let verdict = if ok { "OK" } else { "FAILED" };
    let n = sent.len();
    let line = format!(
        "verdict: {n} sent, {delivered} delivered, {failed} failed, {refused} refused, \
         {open} unresolved, offsets in order: {in_order} => {verdict}"
    );
    (line, ok)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| args.get(i).map_or(default, |a| a.parse().expect("count"));
    let (Some(bootstrap), Some(topic)) = (args.first(), args.get(1)) else {
        eprintln!("usage: blocking BOOTSTRAP TOPIC [TICKS [BURSTS [BURST_SIZE]]]");
        std::process::exit(2);
    };
    let (ticks, bursts, burst_size) = (num(2, 2_000), num(3, 3) as u32, num(4, 10_000));
    let period = Duration::from_millis(1);
    let plan = Plan {
        topic: topic.clone(),
        ticks,
        period,
        bursts,
        burst_size,
    };
    let started = Instant::now();
    let sent = run(bootstrap, &plan, Duration::from_secs(120), |stream, seq| {
        format!("blocking {stream} {seq}").into_bytes()
    });
    let (line, ok) = verdict(&sent);
    println!("{line} (in {:.2?})", started.elapsed());
    std::process::exit(if ok { 0 } else { 1 });
}
