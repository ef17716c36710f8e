//! Outage probe: what kprod-tokio reports, and what the log holds, when its only broker (a
//! local Tansu, memory storage, or a single Apache Kafka node) is paused or killed under a
//! steady load over many partitions; with `--fault none`, its latency and throughput, behind
//! a delayed link if asked.
//!
//! ```text
//! cargo run --release -p kprod-tests --bin outage-probe -- [--broker tansu|kafka]
//!     [--partitions N] [--rate R] [--seconds S] [--value-bytes B] [--delivery-timeout-ms MS]
//!     [--request-timeout-ms MS] [--max-block-ms MS] [--fault none|pause|kill] [--fault-at S]
//!     [--fault-for S] [--link-delay-ms D] [--set KEY=VALUE]... [--dump FILE]
//! ```
//!
//! `--broker tansu` (the default) starts a local Tansu ([`Tansu`]); `--broker kafka` one
//! Apache Kafka node (KRaft, the harness's [`Kafka`] settings; `KPROD_KAFKA` or
//! `scripts/install-kafka.sh` as for the tests), topic replication factor 1. With Kafka,
//! `--fault kill` is refused (exit 2): a restarted Kafka keeps its log, which this probe's
//! kill audit does not model; `--fault pause` SIGSTOPs the JVM. The time to start the
//! broker and to get a leader for every partition is printed (with Kafka the probe waits up
//! to 10 minutes for the leaders, and then, before the clock starts, until the broker answers
//! ListOffsets for every partition: its metadata names leaders before it serves them all).
//!
//! `--link-delay-ms D` puts the fault proxy ([`kprod_tests::proxy`], on a runtime of its own)
//! in front of the broker, with the rule `Rule::any(Fault::Delay(D ms)).forever()`: every
//! response is held D ms after it arrives from the broker (pipelined responses do not add
//! their delays up), so each round trip gains D ms. The broker advertises the proxy's port,
//! and the producer bootstraps at the proxy; `--link-delay-ms 0` keeps the proxy with no
//! rule (its own cost only), no `--link-delay-ms` connects directly. The independent reader
//! reads undelayed (Kafka: the unproxied listener; Tansu: the rule is cleared first).
//!
//! `--set KEY=VALUE` (repeatable) adds a producer property after the probe's own, so it
//! overrides them: e.g. `--set kprod.max.batches.per.request=1000000` (no cap on batches per
//! Produce request but `max.request.size`, the Java client's rule).
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
//! - send-to-acknowledgement latency (outcome stamp − the send's acceptance) of the
//!   acknowledged records: p50, p99, p99.9 and max, over every acknowledged record and over
//!   those sent in the steady part (from t = 2 s, or a quarter of `--seconds` if less, to the
//!   end of sending); acknowledgements a second over the steady part (by outcome stamp);
//! - kprod-tokio's log events of level info and above, counted by message (batch retries
//!   with their error);
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
use kprod_tests::proxy::{self, Proxy, Rule};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::{Kafka, KafkaOptions, Tansu, TANSU_VERSION};
use kprod_tokio::{
    config_from_properties, DeliveryError, DeliveryFuture, ErrorKind, FailureReason, ProducerHandle,
};
use tokio::task::{unconstrained, Unconstrained};
use tokio::time::MissedTickBehavior;

const USAGE: &str = "usage: outage-probe [--broker tansu|kafka (tansu)] [--partitions N (10000)] \
[--rate R/s (20000)] [--seconds S (30)] [--value-bytes B (100)] \
[--delivery-timeout-ms MS (12000)] [--request-timeout-ms MS (8000)] [--max-block-ms MS (5000)] \
[--fault none|pause|kill (pause; kill with tansu only)] [--fault-at S (8)] [--fault-for S (15)] \
[--link-delay-ms D (no proxy)] [--set KEY=VALUE]... [--dump FILE]";
const TOPIC: &str = "outage-probe";
const TICKS_PER_SECOND: u64 = 100;
/// The longest the independent reader may take to read the topic back.
const READER_TIMEOUT: Duration = Duration::from_secs(600);
/// How many times Kafka's harness may wait for the topic's leaders (60 s each) before the
/// probe gives up: creating many partitions can be slow.
const KAFKA_TOPIC_WAITS: usize = 10;
/// How long Kafka's harness waits for a topic's leaders at a time.
const TOPIC_WAIT: Duration = Duration::from_secs(60);
/// The node id of the single Kafka node.
const KAFKA_NODE: i32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BrokerKind {
    Tansu,
    Kafka,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Pause,
    Kill,
}

#[derive(Debug, Clone)]
struct Args {
    broker: BrokerKind,
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
    /// `Some(D)`: a fault proxy in front of the broker holds every response `D` ms.
    link_delay_ms: Option<u64>,
    /// Extra producer properties, after the probe's own (so they override them).
    set: Vec<(String, String)>,
    dump: Option<String>,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut a = Self {
            broker: BrokerKind::Tansu,
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
            link_delay_ms: None,
            set: Vec::new(),
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
                "--link-delay-ms" => a.link_delay_ms = Some(int()?),
                "--set" => {
                    let (k, val) = v.split_once('=').ok_or_else(bad)?;
                    a.set.push((k.trim().to_owned(), val.trim().to_owned()));
                }
                "--broker" if v == "tansu" => a.broker = BrokerKind::Tansu,
                "--broker" if v == "kafka" => a.broker = BrokerKind::Kafka,
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
        if a.broker == BrokerKind::Kafka && a.fault == Fault::Kill {
            return Err("--fault kill is not supported with --broker kafka".into());
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

/// The broker under test.
enum Broker {
    Tansu(Tansu),
    /// A single Apache Kafka node (KRaft, combined broker and controller).
    Kafka(Kafka),
}

impl Broker {
    /// Starts the broker, advertising `advertised_port` (a proxy's) to clients if given.
    fn start(kind: BrokerKind, advertised_port: Option<u16>) -> Self {
        match (kind, advertised_port) {
            (BrokerKind::Tansu, None) => Self::Tansu(Tansu::start()),
            (BrokerKind::Tansu, Some(p)) => Self::Tansu(Tansu::start_advertising(p)),
            (BrokerKind::Kafka, ports) => {
                let mut opts = KafkaOptions::new(1);
                if let Some(p) = ports {
                    opts = opts.advertise(vec![p]);
                }
                Self::Kafka(Kafka::start_with(opts))
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Tansu(_) => format!("Tansu {TANSU_VERSION} (memory storage)"),
            Self::Kafka(k) => format!("Apache Kafka {} (1 node, KRaft)", k.version()),
        }
    }

    /// Where a proxy in front of the broker forwards to.
    fn client_addr(&self) -> std::net::SocketAddr {
        match self {
            Self::Tansu(t) => t.addr(),
            Self::Kafka(k) => k.client_addr(0),
        }
    }

    /// Where the independent reader bootstraps: Kafka's unproxied listener; Tansu's own
    /// port (its metadata may name the proxy, whose rules are cleared before reading).
    fn reader_bootstrap(&self) -> String {
        match self {
            Self::Tansu(t) => t.addr().to_string(),
            Self::Kafka(k) => k.bootstrap(),
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Self::Tansu(t) => t.pid(),
            Self::Kafka(k) => k.pid(KAFKA_NODE).expect("the Kafka node is running"),
        }
    }

    /// Creates the topic and waits until every partition has a leader. Kafka's harness waits
    /// 60 s at a time and panics; the probe waits up to [`KAFKA_TOPIC_WAITS`] times that.
    fn create_topic(&self, partitions: u32) -> Result<(), String> {
        let kafka = match self {
            Self::Tansu(t) => {
                t.create_topic(TOPIC, partitions);
                return Ok(());
            }
            Self::Kafka(k) => k,
        };
        let p = partitions as i32;
        let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            kafka.create_topic(TOPIC, p, 1, None)
        }));
        let deadline = Instant::now() + TOPIC_WAIT * KAFKA_TOPIC_WAITS as u32;
        let mut led = created.is_ok();
        for _ in 1..KAFKA_TOPIC_WAITS {
            if led {
                break;
            }
            led = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                kafka.wait_topic(TOPIC, p, 1)
            }))
            .is_ok();
        }
        if !led {
            return Err(format!(
                "topic {TOPIC} did not get {partitions} led partitions on Kafka"
            ));
        }
        serving(&kafka.bootstrap(), partitions, deadline)
    }
}

/// Waits until the broker answers ListOffsets for every partition of the topic without an
/// error (writing nothing). Kafka's metadata names a leader for every partition before the
/// broker has made itself leader of each: a Produce to one it has not yet reached gets
/// NOT_LEADER_OR_FOLLOWER, so the clock would start on a broker still creating partitions.
fn serving(bootstrap: &str, partitions: u32, deadline: Instant) -> Result<(), String> {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "outage-probe-ready")
        .create()
        .map_err(|e| format!("readiness consumer: {e}"))?;
    let (started, mut errors) = (Instant::now(), 0u64);
    for p in 0..partitions as i32 {
        while let Err(e) = consumer.fetch_watermarks(TOPIC, p, Duration::from_secs(5)) {
            errors += 1;
            if Instant::now() >= deadline {
                return Err(format!("partition {p} still not served: {e}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    println!(
        "every partition answered ListOffsets {} after its leader was in the metadata \
         ({errors} errors before)",
        secs(started.elapsed())
    );
    Ok(())
}

/// The fault schedule, on its own thread: the broker's state changes are blocking.
fn run_fault(mut broker: Broker, args: &Args, start: Instant) -> (Broker, FaultTimes) {
    let (at, until) = args.fault_window();
    let mut t = FaultTimes::default();
    if args.fault == Fault::None {
        return (broker, t);
    }
    sleep_until(start + at);
    let (pid, pause) = (broker.pid(), args.fault == Fault::Pause);
    signal(pid, if pause { "-STOP" } else { "-KILL" });
    t.began = Some(start.elapsed());
    sleep_until(start + until);
    if pause {
        signal(pid, "-CONT");
    } else if let Broker::Tansu(tansu) = &mut broker {
        tansu.restart();
        t.restarted = Some(start.elapsed());
        tansu.create_topic(TOPIC, args.partitions);
    }
    t.ended = Some(start.elapsed());
    (broker, t)
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
    // The proxy runs on a runtime of its own, so that the probe's sending does not hold
    // back the responses it delays.
    let proxy_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("build the proxy's runtime");
    let proxy = match args.link_delay_ms {
        None => None,
        Some(d) => match proxy_rt.block_on(Proxy::bind()) {
            Ok(p) => {
                if d > 0 {
                    let delay = proxy::Fault::Delay(Duration::from_millis(d));
                    p.add_rule(Rule::any(delay).forever());
                }
                Some(p)
            }
            Err(e) => return setup_error(&format!("proxy: {e}")),
        },
    };
    let started = Instant::now();
    let broker = Broker::start(args.broker, proxy.as_ref().map(Proxy::port));
    let broker_took = started.elapsed();
    let started = Instant::now();
    if let Err(e) = broker.create_topic(args.partitions) {
        return setup_error(&e);
    }
    let topic_took = started.elapsed();
    if let Some(p) = &proxy {
        p.set_upstream(broker.client_addr());
    }
    let brokers = match &proxy {
        Some(p) => p.bootstrap(),
        None => broker.client_addr().to_string(),
    };
    let reader_brokers = broker.reader_bootstrap();
    let load = loadavg();
    println!(
        "outage probe: {}, {args:?}; broker up in {}, topic of {} partitions led in {}; \
         producer bootstrap {brokers}{}; load {load}",
        broker.describe(),
        secs(broker_took),
        args.partitions,
        secs(topic_took),
        match args.link_delay_ms {
            Some(d) => format!(" (fault proxy holding every response {d} ms)"),
            None => String::new(),
        }
    );
    let rt = kprod_tests::e2e::runtime();
    let ms = [
        args.delivery_timeout_ms,
        args.request_timeout_ms,
        args.max_block_ms,
    ];
    let [dt, rt_ms, mb] = ms.map(|v| v.to_string());
    let props = vec![
        ("bootstrap.servers", brokers.as_str()),
        ("client.id", "outage-probe"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("delivery.timeout.ms", &dt),
        ("request.timeout.ms", &rt_ms),
        ("max.block.ms", &mb),
        ("allow.auto.create.topics", "false"),
    ];
    let set = args.set.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let props = kprod_tests::override_properties(props, set);
    let config = config_from_properties(&props);
    let log_counts = kprod_tests::log_counter::install();
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
    let fault = std::thread::spawn(move || run_fault(broker, &fault_args, start));
    let capacity = (args.rate * args.seconds) as usize;
    let mut book = Book::new(start, capacity, args.value_bytes);
    let stats = rt.block_on(send_all(&args, &producer, &mut book));
    let (broker, times) = fault.join().expect("fault thread");
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
    latency(&args, &book);
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
    // The reader reads undelayed.
    if let Some(p) = &proxy {
        p.clear_rules();
    }
    let counts = std::mem::take(&mut *log_counts.lock().expect("log counts"));
    if !counts.is_empty() {
        println!("kprod-tokio log events (info and above):");
        for (name, n) in counts {
            println!("  {n:>9}  {name}");
        }
    }
    let read_started = Instant::now();
    let log = read_topic(
        &reader_brokers,
        TOPIC,
        args.partitions as i32,
        READER_TIMEOUT,
    );
    drop(broker);
    drop(proxy);
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

/// The `q` quantile of sorted `d`, in ms (nearest rank).
fn quantile_ms(d: &[Duration], q: f64) -> f64 {
    let rank = ((q * d.len() as f64).ceil() as usize).clamp(1, d.len());
    d[rank - 1].as_secs_f64() * 1e3
}

/// Prints send-to-acknowledgement latency and the acknowledgement rate.
fn latency(a: &Args, book: &Book) {
    let acked: Vec<&Sent> = (book.sent.iter())
        .filter(|s| matches!(s.outcome, Outcome::Acked(_)))
        .collect();
    let sending = Duration::from_secs(a.seconds);
    // The steady part: from a warm-up (2 s, at most a quarter of the sending) to the end of
    // sending.
    let warm = Duration::from_secs(2).min(sending / 4);
    let line = |what: &str, set: &[&Sent]| {
        let mut d: Vec<Duration> = set.iter().map(|s| s.done() - s.sent()).collect();
        if d.is_empty() {
            println!("latency send -> acknowledgement, {what}: none acknowledged");
            return;
        }
        d.sort_unstable();
        println!(
            "latency send -> acknowledgement, {what} ({} records): p50 {:.1} ms, p99 {:.1} ms, \
             p99.9 {:.1} ms, max {:.1} ms",
            d.len(),
            quantile_ms(&d, 0.5),
            quantile_ms(&d, 0.99),
            quantile_ms(&d, 0.999),
            quantile_ms(&d, 1.0)
        );
    };
    line("every acknowledged record", &acked);
    let steady: Vec<&Sent> = (acked.iter().copied())
        .filter(|s| s.sent() >= warm && s.sent() < sending)
        .collect();
    line(&format!("records sent from t={}", secs(warm)), &steady);
    let window = sending - warm;
    let in_window = (acked.iter())
        .filter(|s| s.done() >= warm && s.done() < sending)
        .count();
    let last = acked.iter().map(|s| s.done()).max().unwrap_or_default();
    println!(
        "acknowledged records/s from t={} to t={}: {:.0} ({in_window} acknowledgements); all {} \
         acknowledged by t={}",
        secs(warm),
        secs(sending),
        in_window as f64 / window.as_secs_f64(),
        acked.len(),
        secs(last)
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
