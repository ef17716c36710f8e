//! Outage probe: what kprod-tokio reports, and what the log holds, when its only broker (a
//! local Tansu, memory storage) is paused or killed under a steady load over many partitions.
//!
//! ```text
//! cargo run --release -p kprod-tests --bin outage-probe -- [--partitions N] [--rate R]
//!     [--seconds S] [--value-bytes B] [--delivery-timeout-ms MS] [--request-timeout-ms MS]
//!     [--max-block-ms MS] [--fault none|pause|kill] [--fault-at S] [--fault-for S]
//!     [--dump FILE]
//! ```
//!
//! One idempotent producer (acks=all, kprod's default batch and linger settings) sends `R`
//! records a second for `S` seconds, paced by a 10 ms tokio interval (a tick missed while a
//! send waited for `buffer.memory` is skipped, its records counted as not offered), round
//! robin over the partitions by explicit partition, each value the ledger's
//! `TOPIC/PARTITION/INDEX` ([`ledger_value`]) padded to `B` bytes. A refused send is counted
//! by its error, not retried. At `--fault-at` seconds the broker is SIGSTOPped for
//! `--fault-for` seconds, then SIGCONTed (`pause`), or SIGKILLed, left down for `--fault-for`
//! seconds and started again empty, its topic created anew (`kill`; the producer has
//! `allow.auto.create.topics=false` so that it cannot create the topic first). Every outcome
//! is stamped when the producer resolves it, by the delivery future's waker (the futures are
//! polled outside tokio's cooperative budget, which would otherwise wake them early and
//! misdate the stamps). Printed:
//!
//! - outcome counts by kind;
//! - delivery timeouts: how many, min / p50 / max of failure time − send time (the send's
//!   acceptance), and how many failed less than half `delivery.timeout.ms` after it, or
//!   more than `delivery.timeout.ms` (+10 ms);
//! - the first acknowledgement after the fault ended, and acknowledgements in each of the
//!   10 seconds after;
//! - this process's RSS (VmRSS) before sending, at its peak in the fault window, at the end
//!   of sending and once every record resolved (the probe's own record book included);
//! - the audit ([`audit`]) of the topic read back by the independent reader (librdkafka's
//!   consumer): duplicates, reorders, acknowledged records missing or at another offset,
//!   `NotPersisted` records in the log, `PossiblyPersisted` ones present / absent, and
//!   failures that handed back another record than the one sent. After a kill, records
//!   acknowledged before the new broker accepted connections are counted apart: the restart
//!   may lose them.
//!
//! `--dump FILE` writes one line per record: index, partition, send and outcome times (µs
//! from the start of sending) and the outcome.
//!
//! Exit status: 0 truthful, 1 the audit found a lie (a duplicate, a reorder, an acknowledged
//! record missing or at another offset not explained by a restart, a `NotPersisted` record
//! in the log, a wrong record handed back), 2 usage or setup error, 3 records left without
//! an outcome.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use kprod_core::{Persistence, Record};
use kprod_tests::ledger::{audit, ledger_value, Checked, Reported};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::{Tansu, TANSU_VERSION};
use kprod_tokio::{
    config_from_properties, DeliveryError, DeliveryFuture, ErrorKind, FailureReason, ProducerHandle,
};
use tokio::task::{unconstrained, Unconstrained};
use tokio::time::MissedTickBehavior;

const USAGE: &str = "usage: outage-probe [--partitions N (10000)] [--rate R/s (20000)] \
[--seconds S (30)] [--value-bytes B (100)] [--delivery-timeout-ms MS (12000)] \
[--request-timeout-ms MS (8000)] [--max-block-ms MS (5000)] [--fault none|pause|kill (pause)] \
[--fault-at S (8)] [--fault-for S (15)] [--dump FILE]";
const TOPIC: &str = "outage-probe";
const TICKS_PER_SECOND: u64 = 100;
/// The longest the independent reader may take to read the topic back.
const READER_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Pause,
    Kill,
}

#[derive(Debug, Clone)]
struct Args {
    partitions: u32,
    rate: u64,
    seconds: u64,
    value_bytes: usize,
    delivery_timeout_ms: u64,
    request_timeout_ms: u64,
    max_block_ms: u64,
    fault: Fault,
    fault_at: f64,
    fault_for: f64,
    dump: Option<String>,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut a = Self {
            partitions: 10_000,
            rate: 20_000,
            seconds: 30,
            value_bytes: 100,
            delivery_timeout_ms: 12_000,
            request_timeout_ms: 8_000,
            max_block_ms: 5_000,
            fault: Fault::Pause,
            fault_at: 8.0,
            fault_for: 15.0,
            dump: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = || format!("invalid value {v:?} for {flag}");
            let int = || v.parse::<u64>().map_err(|_| bad());
            let float = || v.parse::<f64>().map_err(|_| bad());
            match flag.as_str() {
                "--partitions" => a.partitions = v.parse().map_err(|_| bad())?,
                "--rate" => a.rate = int()?,
                "--seconds" => a.seconds = int()?,
                "--value-bytes" => a.value_bytes = int()? as usize,
                "--delivery-timeout-ms" => a.delivery_timeout_ms = int()?,
                "--request-timeout-ms" => a.request_timeout_ms = int()?,
                "--max-block-ms" => a.max_block_ms = int()?,
                "--fault-at" => a.fault_at = float()?,
                "--fault-for" => a.fault_for = float()?,
                "--dump" => a.dump = Some(v),
                "--fault" if v == "none" => a.fault = Fault::None,
                "--fault" if v == "pause" => a.fault = Fault::Pause,
                "--fault" if v == "kill" => a.fault = Fault::Kill,
                _ => return Err(format!("unknown option or value: {flag} {v}")),
            }
        }
        // Times are kept in u32 microseconds: about 70 minutes.
        if a.partitions == 0 || a.rate == 0 || !(1..=1_800).contains(&a.seconds) {
            return Err("--partitions and --rate must be positive, --seconds 1 to 1800".into());
        }
        if !(a.fault_at >= 0.0 && a.fault_for >= 0.0) {
            return Err("--fault-at and --fault-for must be non-negative".into());
        }
        Ok(a)
    }

    fn fault_window(&self) -> (Duration, Duration) {
        let at = Duration::from_secs_f64(self.fault_at);
        (at, at + Duration::from_secs_f64(self.fault_for))
    }
}

/// What a record came to (compact: a run holds up to a million of them).
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Pending,
    Acked(Option<i64>),
    /// The failure's kind ([`Book::kinds`]) and persistence.
    Failed(u16, Persistence),
}

/// A kind of failure, as printed.
struct Kind {
    text: String,
    refused: bool,
    timeout: bool,
}

/// One record sent.
#[derive(Debug, Clone, Copy)]
struct Sent {
    partition: i32,
    /// Microseconds from the start of sending: when the send was accepted (or refused).
    sent_us: u32,
    /// When the producer resolved it.
    done_us: u32,
    outcome: Outcome,
}

impl Sent {
    fn sent(&self) -> Duration {
        Duration::from_micros(self.sent_us.into())
    }
    fn done(&self) -> Duration {
        Duration::from_micros(self.done_us.into())
    }
}

/// Wake-ups of delivery futures, stamped when the producer resolved them.
struct Woken {
    start: Instant,
    list: Mutex<Vec<(usize, u32)>>,
}

/// The waker of one record's delivery future.
struct RecordWaker(usize, Arc<Woken>);

impl Wake for RecordWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let at = micros(self.1.start);
        self.1.list.lock().expect("woken").push((self.0, at));
    }
}

fn micros(start: Instant) -> u32 {
    start.elapsed().as_micros() as u32
}

/// Every record sent, its outcome, and the futures still pending.
struct Book {
    woken: Arc<Woken>,
    sent: Vec<Sent>,
    /// Unconstrained by tokio's cooperative budget: a future polled by a task whose budget
    /// is spent returns `Pending` and wakes at once, which would stamp a wrong time.
    pending: HashMap<usize, Unconstrained<DeliveryFuture>>,
    kinds: Vec<Kind>,
    value_bytes: usize,
    /// Failures that handed back another record than the one sent (index, what came back).
    mismatched: Vec<(usize, String)>,
}

impl Book {
    fn new(start: Instant, capacity: usize, value_bytes: usize) -> Self {
        let list = Mutex::new(Vec::new());
        let (sent, pending) = (Vec::with_capacity(capacity), HashMap::new());
        let woken = Arc::new(Woken { start, list });
        let (kinds, mismatched) = (Vec::new(), Vec::new());
        Self {
            woken,
            sent,
            pending,
            kinds,
            value_bytes,
            mismatched,
        }
    }

    fn record(&mut self, partition: i32, result: Result<DeliveryFuture, DeliveryError>) {
        let (index, now) = (self.sent.len(), micros(self.woken.start));
        let (sent_us, done_us, outcome) = (now, 0, Outcome::Pending);
        self.sent.push(Sent {
            partition,
            sent_us,
            done_us,
            outcome,
        });
        match result {
            Ok(fut) => {
                self.pending.insert(index, unconstrained(fut));
                self.poll(index, now);
            }
            Err(e) => self.settle(index, now, Err(e)),
        }
    }

    /// Polls a pending future with a waker that stamps its resolution.
    fn poll(&mut self, index: usize, at_us: u32) {
        let Some(fut) = self.pending.get_mut(&index) else {
            return;
        };
        let waker = Waker::from(Arc::new(RecordWaker(index, self.woken.clone())));
        if let Poll::Ready(r) = Pin::new(fut).poll(&mut Context::from_waker(&waker)) {
            self.pending.remove(&index);
            self.settle(index, at_us, r.map(|d| d.offset));
        }
    }

    fn settle(&mut self, index: usize, at_us: u32, r: Result<Option<i64>, DeliveryError>) {
        let outcome = match r {
            Ok(offset) => Outcome::Acked(offset),
            Err(e) => {
                let refused = matches!(e.kind, ErrorKind::Refused(_));
                let timeout = matches!(
                    e.kind,
                    ErrorKind::Failed(FailureReason::DeliveryTimeout { .. })
                );
                let text = match &e.kind {
                    ErrorKind::Refused(s) => format!("refused: {s}"),
                    _ => e.to_string(),
                };
                let kind = match self.kinds.iter().position(|k| k.text == text) {
                    Some(k) => k,
                    None => {
                        self.kinds.push(Kind {
                            text,
                            refused,
                            timeout,
                        });
                        self.kinds.len() - 1
                    }
                };
                // The record handed back must be the one sent.
                let partition = self.sent[index].partition;
                let r = e.record().map(|r| (r.partition, r.value.as_deref()));
                if r != Some((
                    Some(partition),
                    Some(&value(partition, index, self.value_bytes)),
                )) {
                    let back = r.map(|(p, v)| (p, v.map(String::from_utf8_lossy)));
                    self.mismatched.push((index, format!("{back:?}")));
                }
                Outcome::Failed(kind as u16, e.persisted)
            }
        };
        let s = &mut self.sent[index];
        (s.done_us, s.outcome) = (at_us, outcome);
    }

    /// Takes the outcomes the producer resolved since the last call.
    fn drain(&mut self) {
        let woken = std::mem::take(&mut *self.woken.list.lock().expect("woken"));
        for (index, at) in woken {
            self.poll(index, at);
        }
    }

    /// One line per record: index, partition, send and outcome times (µs), outcome.
    fn dump(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.sent.iter().enumerate() {
            let outcome = match s.outcome {
                Outcome::Failed(k, p) => format!("{p:?} {}", self.kinds[k as usize].text),
                o => format!("{o:?}"),
            };
            let (p, sent, done) = (s.partition, s.sent_us, s.done_us);
            out.push_str(&format!("{i} {p} {sent} {done} {outcome}\n"));
        }
        out
    }

    fn is_timeout(&self, s: &Sent) -> bool {
        matches!(s.outcome, Outcome::Failed(k, _) if self.kinds[k as usize].timeout)
    }

    /// About the bytes this book holds (they count in the RSS).
    fn bytes(&self) -> usize {
        self.sent.len() * size_of::<Sent>()
            + self.pending.capacity() * (size_of::<(usize, Unconstrained<DeliveryFuture>)>() + 1)
    }
}

/// What the sender saw.
#[derive(Debug, Default)]
struct SendStats {
    scheduled: u64,
    not_offered: u64,
    skipped_ticks: u64,
    waited: u64,
    longest_wait: Duration,
    rss_before: u64,
    rss_fault_peak: u64,
    rss_end: u64,
}

/// When the fault happened, from the start of sending.
#[derive(Debug, Default, Clone, Copy)]
struct FaultTimes {
    began: Option<Duration>,
    ended: Option<Duration>,
    /// Kill: when the new broker accepted connections (before its topic existed).
    restarted: Option<Duration>,
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").args([sig, &pid.to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill {sig} {pid} failed");
}

fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// The fault schedule, on its own thread: the broker's state changes are blocking.
fn run_fault(mut tansu: Tansu, args: &Args, start: Instant) -> (Tansu, FaultTimes) {
    let (at, until) = args.fault_window();
    let mut t = FaultTimes::default();
    if args.fault == Fault::None {
        return (tansu, t);
    }
    sleep_until(start + at);
    let (pid, pause) = (tansu.pid(), args.fault == Fault::Pause);
    signal(pid, if pause { "-STOP" } else { "-KILL" });
    t.began = Some(start.elapsed());
    sleep_until(start + until);
    if pause {
        signal(pid, "-CONT");
    } else {
        tansu.restart();
        t.restarted = Some(start.elapsed());
        tansu.create_topic(TOPIC, args.partitions);
    }
    t.ended = Some(start.elapsed());
    (tansu, t)
}

fn value(partition: i32, index: usize, bytes: usize) -> Vec<u8> {
    let mut v = ledger_value(TOPIC, partition, index).into_bytes();
    if v.len() < bytes {
        v.resize(bytes, b'.');
    }
    v
}

/// Sends at the paced rate for `--seconds`, taking outcomes as they come.
async fn send_all(args: &Args, producer: &ProducerHandle, book: &mut Book) -> SendStats {
    let start = book.woken.start;
    let quota = |k: u64| args.rate * (k + 1) / TICKS_PER_SECOND - args.rate * k / TICKS_PER_SECOND;
    let total_ticks = args.seconds * TICKS_PER_SECOND;
    let (fault_at, fault_until) = args.fault_window();
    let (scheduled, rss_before) = (args.rate * args.seconds, rss_kib());
    let mut st = SendStats {
        scheduled,
        rss_before,
        ..Default::default()
    };
    let tick = Duration::from_secs(1) / TICKS_PER_SECOND as u32;
    let mut interval = tokio::time::interval_at(start.into(), tick);
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let (mut next, mut next_rss) = (0, Duration::ZERO);
    loop {
        let k = ((interval.tick().await.into_std() - start).as_millis() / tick.as_millis()) as u64;
        for missed in next..k.min(total_ticks) {
            st.skipped_ticks += 1;
            st.not_offered += quota(missed);
        }
        if k >= total_ticks {
            break;
        }
        next = k + 1;
        for _ in 0..quota(k) {
            let index = book.sent.len();
            let partition = (index % args.partitions as usize) as i32;
            let record = Record::new(TOPIC, value(partition, index, args.value_bytes));
            let called = Instant::now();
            let r = producer.enqueue(record.with_partition(partition)).await;
            let waited = called.elapsed();
            if waited > Duration::from_millis(1) {
                st.waited += 1;
                st.longest_wait = st.longest_wait.max(waited);
            }
            book.record(partition, r);
        }
        book.drain();
        // RSS about every 100 ms through the fault window and the second after it.
        let now = start.elapsed();
        if now >= fault_at && now <= fault_until + Duration::from_secs(1) && now >= next_rss {
            st.rss_fault_peak = st.rss_fault_peak.max(rss_kib());
            next_rss = now + Duration::from_millis(100);
        }
    }
    st.rss_end = rss_kib();
    st
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, args.partitions);
    let brokers = tansu.addr().to_string();
    let load = loadavg();
    println!("outage probe: Tansu {TANSU_VERSION} (memory storage), {args:?}; load {load}");
    let rt = kprod_tests::e2e::runtime();
    let ms = [
        args.delivery_timeout_ms,
        args.request_timeout_ms,
        args.max_block_ms,
    ];
    let [dt, rt_ms, mb] = ms.map(|v| v.to_string());
    let config = config_from_properties(&[
        ("bootstrap.servers", brokers.as_str()),
        ("client.id", "outage-probe"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("delivery.timeout.ms", &dt),
        ("request.timeout.ms", &rt_ms),
        ("max.block.ms", &mb),
        ("allow.auto.create.topics", "false"),
    ]);
    let _runtime = rt.enter();
    let producer = match config.map(ProducerHandle::connect) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return setup_error(&e),
        Err(e) => return setup_error(&e),
    };
    // Metadata before the clock starts: the partitions are known when sending begins.
    if let Err(e) = rt.block_on(producer.partition_count(TOPIC)) {
        return setup_error(&e);
    }

    let start = Instant::now();
    let fault_args = args.clone();
    let fault = std::thread::spawn(move || run_fault(tansu, &fault_args, start));
    let capacity = (args.rate * args.seconds) as usize;
    let mut book = Book::new(start, capacity, args.value_bytes);
    let stats = rt.block_on(send_all(&args, &producer, &mut book));
    let (tansu, times) = fault.join().expect("fault thread");
    let bound = Duration::from_millis(args.delivery_timeout_ms + args.max_block_ms) * 2;
    let flushed = rt.block_on(producer.flush_timeout(bound)).is_ok();
    book.drain();
    let m = rt.block_on(producer.metrics());
    let rss_resolved = rss_kib();
    if (rt.block_on(producer.close_timeout(Duration::from_secs(30)))).is_err() {
        rt.block_on(producer.abort());
    }
    book.drain();
    report(&args, &book, &stats, &times, flushed, rss_resolved);
    if let Some(path) = &args.dump {
        if let Err(e) = std::fs::write(path, book.dump()) {
            return setup_error(&format!("{path}: {e}"));
        }
    }
    println!(
        "producer: {} batches sent, {} retries, {} epoch bumps, {} producer ids, {} connections \
         opened; load {}",
        m.batches_sent,
        m.retries,
        m.epoch_bumps,
        m.producer_ids,
        m.connections_opened,
        loadavg()
    );
    let read_started = Instant::now();
    let log = read_topic(&brokers, TOPIC, args.partitions as i32, READER_TIMEOUT);
    drop(tansu);
    let log = match log {
        Ok(l) => l,
        Err(e) => return setup_error(&e),
    };
    println!("read back in {}", secs(read_started.elapsed()));
    match check(&args, &book, &times, &log) {
        true => ExitCode::from(1),
        false if !book.pending.is_empty() => ExitCode::from(3),
        false => ExitCode::SUCCESS,
    }
}

fn setup_error(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("outage-probe: {e}");
    ExitCode::from(2)
}

/// Prints what the producer reported and when.
fn report(a: &Args, book: &Book, st: &SendStats, times: &FaultTimes, flushed: bool, rss: u64) {
    let sent = &book.sent;
    let (offered, wait) = (sent.len(), secs(st.longest_wait));
    let (scheduled, not_offered, skipped_ticks) = (st.scheduled, st.not_offered, st.skipped_ticks);
    let waited = st.waited;
    println!(
        "sending: {scheduled} scheduled, {offered} offered, {not_offered} not offered \
         ({skipped_ticks} ticks skipped while a send waited); {waited} sends waited > 1 ms \
         (longest {wait}); every record resolved within the flush bound: {flushed}"
    );
    if let (Some(b), Some(e)) = (times.began, times.ended) {
        let up = (times.restarted.map(secs)).map_or(String::new(), |r| {
            format!(" (broker up at {r}, then the topic created)")
        });
        let (fault, b, e) = (a.fault, secs(b), secs(e));
        println!("fault: {fault:?} at {b}, ended at {e}{up}");
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for s in sent {
        let label = match s.outcome {
            Outcome::Pending => "unresolved",
            Outcome::Acked(Some(_)) => "acknowledged with an offset",
            Outcome::Acked(None) => "acknowledged without an offset (duplicate)",
            Outcome::Failed(k, _) => &book.kinds[k as usize].text,
        };
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    println!("outcomes of {offered} records:");
    for (label, n) in &counts {
        println!("  {n:>9}  {label}");
    }

    let timeouts: Vec<&Sent> = sent.iter().filter(|s| book.is_timeout(s)).collect();
    let mut took: Vec<Duration> = timeouts.iter().map(|s| s.done() - s.sent()).collect();
    took.sort_unstable();
    if let (Some(min), Some(max)) = (took.first(), took.last()) {
        let dt = Duration::from_millis(a.delivery_timeout_ms);
        let (half, late) = (dt / 2, dt + Duration::from_millis(10));
        let early = took.iter().filter(|d| **d < half).count();
        let over = took.iter().filter(|d| **d > late).count();
        let first = timeouts.iter().map(|s| s.done()).min().unwrap_or_default();
        let last = timeouts.iter().map(|s| s.done()).max().unwrap_or_default();
        println!(
            "delivery timeouts: {}; failure - send: min {}, p50 {}, max {}; {early} failed less \
             than half the delivery timeout ({}) after their send, {over} more than the delivery \
             timeout + 10 ms; failed from t={} to t={}",
            took.len(),
            secs(*min),
            secs(took[took.len() / 2]),
            secs(*max),
            secs(half),
            secs(first),
            secs(last)
        );
    } else {
        println!("delivery timeouts: none");
    }

    if let Some(end) = times.ended {
        let acked = (sent.iter()).filter(|s| matches!(s.outcome, Outcome::Acked(_)));
        let after: Vec<Duration> = acked.filter_map(|s| s.done().checked_sub(end)).collect();
        let mut per_second = [0u64; 10];
        for d in &after {
            if let Some(n) = per_second.get_mut(d.as_secs() as usize) {
                *n += 1;
            }
        }
        let first = (after.iter().min()).map_or("never".into(), |d| format!("+{}", secs(*d)));
        println!(
            "after the fault ended: first acknowledgement {first}; acknowledged in each of the \
             next 10 s: {per_second:?}"
        );
    }
    println!(
        "RSS: before sending {}, peak in the fault window {}, end of sending {}, every record \
         resolved {} (this probe's record book about {} of it)",
        mib(st.rss_before),
        if st.rss_fault_peak > 0 {
            mib(st.rss_fault_peak)
        } else {
            "-".into()
        },
        mib(st.rss_end),
        mib(rss),
        mib(book.bytes() as u64 / 1024)
    );
}

/// Audits the log against the outcomes and prints the audit line; true if it found a lie.
fn check(a: &Args, book: &Book, times: &FaultTimes, log: &BTreeMap<i32, Vec<ReadRecord>>) -> bool {
    let sent = &book.sent;
    let values: Vec<Vec<u8>> = (sent.iter().enumerate())
        .map(|(i, s)| value(s.partition, i, a.value_bytes))
        .collect();
    let in_log: HashSet<&[u8]> = (log.values().flatten())
        .filter_map(|r| r.value.as_deref())
        .collect();
    // After a kill, what the old broker acknowledged may be gone with it: such records are
    // audited as possibly persisted and counted apart.
    let by_old_broker = |s: &Sent| times.restarted.is_some_and(|r| s.done() < r);
    let (mut lost, mut kept, mut np_present, mut pp_present, mut pp_absent) = (0, 0, 0, 0, 0);
    let mut checked = Vec::with_capacity(sent.len());
    for (s, v) in sent.iter().zip(&values) {
        let present = in_log.contains(v.as_slice());
        let (partition, value) = (s.partition, v.as_slice());
        let outcome = match s.outcome {
            Outcome::Pending => None,
            Outcome::Acked(_) if by_old_broker(s) => {
                *(if present { &mut kept } else { &mut lost }) += 1;
                let error = "acknowledged before the restart";
                failed(error.into(), Persistence::PossiblyPersisted, false)
            }
            Outcome::Acked(offset) => Some(Reported::Delivered { partition, offset }),
            Outcome::Failed(k, persisted) => {
                match (persisted, present) {
                    (Persistence::NotPersisted, true) => np_present += 1,
                    (Persistence::PossiblyPersisted, true) => pp_present += 1,
                    (Persistence::PossiblyPersisted, false) => pp_absent += 1,
                    _ => {}
                }
                let kind = &book.kinds[k as usize];
                failed(kind.text.clone(), persisted, kind.refused)
            }
        };
        checked.push(Checked {
            partition,
            value,
            outcome,
        });
    }
    let r = audit(TOPIC, &checked, log);
    let (dup, reorders) = (r.duplicates, r.summary.out_of_order);
    let (missing, offsets) = (r.missing_acknowledged, r.wrong_offsets);
    let mismatched = book.mismatched.len();
    let lie = dup + reorders + missing + offsets + r.other + np_present + mismatched > 0;
    println!(
        "audit: {} records in the log; duplicates {dup}, reorders {reorders}, acknowledged but \
         missing {missing}, wrong offsets {offsets}, NotPersisted in the log {np_present}, \
         PossiblyPersisted present {pp_present} / absent {pp_absent}, failures handing back \
         another record {mismatched}, other {}, unresolved {}; acknowledged before a restart {} \
         (lost with the restart {lost}, in the log {kept}) => {}",
        r.summary.in_log,
        r.other,
        r.unresolved,
        lost + kept,
        if lie { "LIE" } else { "truthful" }
    );
    for p in r.problems.iter().chain(&r.order_problems).take(20) {
        println!("  {p}");
    }
    for (i, back) in book.mismatched.iter().take(5) {
        println!("  record {i} failed handing back {back}");
    }
    lie
}

fn failed(error: String, persisted: Persistence, refused: bool) -> Option<Reported> {
    Some(Reported::Failed {
        error,
        persisted,
        refused,
    })
}
