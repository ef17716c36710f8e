//! Scaling, memory and latency measurements of kprod (issue 12).
//!
//! ```text
//! bench-scaling cpu [--records N] [--rounds N] [--window N] [--partitions 1,100,1000,10000]
//!                   [--in-flight 1,5] [--brokers 1,3] [--svg PATH]
//! bench-scaling memory [--records N] [--size BYTES] [--partitions N]
//! bench-scaling latency [--broker tansu|kafka] [--ticks N] [--burst N] [--bursts N]
//!                       [--partitions N] [--size BYTES] [--rounds N]
//!                       [--clients kprod,rdkafka,java,franz]
//! bench-scaling steady [--broker tansu|kafka] [--seconds N] [--rate N] [--size BYTES]
//!                      [--partitions N]
//! ```
//!
//! `cpu`: the real `Producer` against kprod-model's broker model ([`Cluster`]), in process,
//! no sockets, virtual time. Every 1 ms tick the application sends `--window` records (100 B,
//! spread evenly over the partitions), the producer's deadline is served, its outputs drained,
//! and the broker answers, one tick later, every request it received. Only the producer's own
//! calls are timed (`send`, `handle_timeout`, `handle_read`, the `poll_output` drains); the
//! model broker's work is outside. The same total of records for every row; ratios are
//! against the 1-partition row of the same brokers and in-flight group in the same run, best
//! of `--rounds`. `--svg PATH` also draws the table as two log-log plots (ns per record and
//! ns per Produce batch against partitions, one line per brokers/in-flight group).
//!
//! `memory`: one process per case (the binary runs itself): a producer made ready against the
//! model broker, then the broker stops answering and `--records` records of `--size` bytes are
//! sent; the resident set (`VmRSS` of `/proc/self/status`) before and after, the producer's
//! `buffered_bytes()`, and the overhead per record beyond the value bytes.
//!
//! `latency`: kprod-tokio, librdkafka (`rdkafka`'s `FutureProducer`) and the Java producer
//! (kafka-clients, `tests/java`'s `seed` command, `scripts/install-java-ref.sh`) against one
//! real broker (Tansu, or Apache Kafka 1 node), taking turns: the seed load, a ticker sending
//! one record every 1 ms while bursts of overlapping sends run, and per record the time from
//! the send call to its acknowledgement; percentiles per client and stream kind, medians over
//! rounds and kprod's ratio to each.
//!
//! `steady`: kprod-tokio against a real broker at a steady rate (`--rate` records/s of
//! `--size` bytes over `--partitions` partitions, sent every 10 ms, every record awaited) for
//! `--seconds`; the resident set (`VmRSS`) sampled every second, printed per minute (min/max)
//! and summed up as the first minute against the last: a leak shows as growth.

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::{ConnId, Event, Output, Producer, ProducerConfig, Record};
use kprod_model::broker::{split_frames, BrokerMode, Cluster};
use kprod_tests::e2e::runtime;
use kprod_tests::javaref;
use kprod_tests::seed::{fresh_run_id, SeedPlan, Source};
use kprod_tests::{Kafka, Tansu};
use kprod_tokio::{config_from_properties, ProducerHandle};
use rdkafka::producer::{FutureProducer, FutureRecord};

const TOPIC: &str = "scaling";
const NODES: [&str; 3] = ["b1:9092", "b2:9092", "b3:9092"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first() else {
        eprintln!("usage: bench-scaling cpu|memory|latency|steady [options] (see the source)");
        return ExitCode::FAILURE;
    };
    let opts = match parse_opts(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match mode.as_str() {
        "cpu" => cpu(&opts),
        "memory" => memory(&opts),
        "memory-case" => memory_case(&opts),
        "latency" => latency(&opts),
        "steady" => steady(&opts),
        other => {
            eprintln!("unknown mode {other}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `--name value` pairs.
fn parse_opts(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut it = args.iter();
    while let Some(name) = it.next() {
        let key = name
            .strip_prefix("--")
            .ok_or_else(|| format!("expected --name, got {name}"))?;
        let value = it.next().ok_or_else(|| format!("{name} needs a value"))?;
        out.insert(key.to_owned(), value.clone());
    }
    Ok(out)
}

fn num(opts: &BTreeMap<String, String>, key: &str, default: usize) -> usize {
    opts.get(key).map_or(default, |v| {
        v.replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("--{key}: {v:?} is not a number"))
    })
}

fn list(opts: &BTreeMap<String, String>, key: &str, default: &[usize]) -> Vec<usize> {
    opts.get(key).map_or_else(
        || default.to_vec(),
        |v| {
            v.split(',')
                .map(|x| {
                    x.replace('_', "")
                        .parse()
                        .unwrap_or_else(|_| panic!("--{key}: {x:?} is not a number"))
                })
                .collect()
        },
    )
}

// ---------------------------------------------------------------------------------------------
// The in-process driver: the real producer, the broker model, no sockets
// ---------------------------------------------------------------------------------------------

/// Time spent in, and calls made to, one kind of producer call.
#[derive(Debug, Default, Clone, Copy)]
struct Meter {
    calls: u64,
    spent: Duration,
}

impl Meter {
    fn add(&mut self, calls: u64, spent: Duration) {
        self.calls += calls;
        self.spent += spent;
    }

    fn ns_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.spent.as_nanos() as f64 / self.calls as f64
        }
    }
}

/// What one measured run cost the producer.
#[derive(Debug, Default, Clone, Copy)]
struct Costs {
    send: Meter,
    poll: Meter,
    read: Meter,
    timeout: Meter,
    /// Produce batches the broker received.
    batches: u64,
    /// Produce requests the broker received.
    requests: u64,
    delivered: u64,
}

impl Costs {
    fn total(&self) -> Duration {
        self.send.spent + self.poll.spent + self.read.spent + self.timeout.spent
    }
}

/// One connection as the driver sees it.
struct Link {
    node: i32,
    to_broker: BytesMut,
    to_client: BytesMut,
}

struct Rig {
    producer: Producer,
    cluster: Cluster,
    now: Instant,
    links: HashMap<ConnId, Link>,
    /// When false, the broker reads nothing (the memory case).
    answering: bool,
    costs: Costs,
}

impl Rig {
    fn new(partitions: i32, brokers: usize, max_in_flight: usize, buffer_memory: usize) -> Self {
        let mut cluster = Cluster::new(BrokerMode::Lenient, &NODES[..brokers]);
        cluster.create_topic(TOPIC, partitions, 1);
        for p in 0..partitions {
            cluster.partition_mut(TOPIC, p).leader = p % brokers as i32 + 1;
        }
        let now = Instant::now();
        let cfg = ProducerConfig {
            bootstrap_servers: NODES[..brokers].iter().map(|s| (*s).to_owned()).collect(),
            max_in_flight,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            buffer_memory,
            ..ProducerConfig::default()
        };
        Self {
            producer: Producer::new(cfg, now).expect("valid config"),
            cluster,
            now,
            links: HashMap::new(),
            answering: true,
            costs: Costs::default(),
        }
    }

    /// Drains the producer's outputs (timed, as `poll_output`).
    fn drain(&mut self) {
        let t = Instant::now();
        let mut polls = 0;
        loop {
            polls += 1;
            match self.producer.poll_output() {
                Output::Wait { .. } => break,
                Output::Connect { conn, addr } => {
                    let node = self.cluster.node_at(&addr).expect("known node");
                    self.links.insert(
                        conn,
                        Link {
                            node,
                            to_broker: BytesMut::new(),
                            to_client: BytesMut::new(),
                        },
                    );
                    self.producer.handle_connected(self.now, conn);
                }
                Output::Transmit { conn, bytes } => {
                    if self.answering {
                        if let Some(l) = self.links.get_mut(&conn) {
                            l.to_broker.extend_from_slice(&bytes);
                        }
                    }
                }
                Output::Close { conn, .. } => {
                    self.links.remove(&conn);
                }
                Output::Event(Event::Delivered(d)) => self.costs.delivered += d.ids.len() as u64,
                Output::Event(Event::Failed { id, error, .. }) => {
                    panic!("record {id:?} failed: {error:?}")
                }
                Output::Event(_) | Output::SaslInput { .. } => {}
            }
        }
        self.costs.poll.add(polls, t.elapsed());
    }

    /// The broker reads every request received so far and answers (not timed); then the
    /// producer reads the answers (timed, as `handle_read`) and is drained.
    fn broker_answers(&mut self) {
        let mut conns: Vec<ConnId> = self.links.keys().copied().collect();
        conns.sort_unstable();
        for conn in &conns {
            let link = self.links.get_mut(conn).expect("link");
            for frame in split_frames(&mut link.to_broker) {
                if frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == 0 {
                    self.costs.requests += 1;
                    self.costs.batches += count_batches(&frame);
                }
                let resp = self.cluster.handle(link.node, frame).expect("answer");
                link.to_client.extend_from_slice(&resp);
            }
        }
        for conn in conns {
            let Some(link) = self.links.get_mut(&conn) else {
                continue;
            };
            if link.to_client.is_empty() {
                continue;
            }
            let mut buf = std::mem::take(&mut link.to_client);
            let t = Instant::now();
            self.producer.handle_read(self.now, conn, &mut buf);
            self.costs.read.add(1, t.elapsed());
            self.drain();
        }
    }

    /// One tick of virtual time: the deadline, then a drain.
    fn tick(&mut self, d: Duration) {
        self.now += d;
        let t = Instant::now();
        self.producer.handle_timeout(self.now);
        self.costs.timeout.add(1, t.elapsed());
        self.drain();
    }

    /// Sends `records` (timed, as `send`), then drains.
    fn send_all(&mut self, records: Vec<Record>) {
        let n = records.len() as u64;
        let t = Instant::now();
        for r in records {
            self.producer.send(self.now, r).expect("accepted");
        }
        self.costs.send.add(n, t.elapsed());
        self.drain();
    }

    /// Ticks until every record is resolved.
    fn settle(&mut self) {
        let mut ticks = 0;
        while self.producer.pending_records() > 0 {
            self.broker_answers();
            self.tick(Duration::from_millis(1));
            ticks += 1;
            assert!(ticks < 100_000, "producer stalled");
        }
    }
}

/// Counts the record batches of a Produce request frame: the number of partitions in it,
/// read from the request with the core's own codec.
fn count_batches(frame: &Bytes) -> u64 {
    use kprod_core::protocol::produce::ProduceRequest;
    use kprod_core::protocol::{Message, Reader, Request, RequestHeader};
    let mut r = Reader::new(frame.clone());
    let _key = r.i16().unwrap_or(0);
    let version = r.i16().unwrap_or(0);
    let mut r = Reader::new(frame.clone());
    if RequestHeader::decode(ProduceRequest::request_header_version(version), &mut r).is_err() {
        return 0;
    }
    ProduceRequest::decode_exact(version, Bytes::copy_from_slice(r.peek_rest())).map_or(0, |req| {
        req.topic_data
            .iter()
            .map(|t| t.partition_data.len() as u64)
            .sum()
    })
}

fn record(partition: i32, size: usize, i: usize) -> Record {
    let mut v = vec![b'.'; size];
    let tag = i.to_le_bytes();
    let k = tag.len().min(size);
    v[..k].copy_from_slice(&tag[..k]);
    Record {
        topic: kprod_core::TopicName::from_static(TOPIC),
        partition: Some(partition),
        key: None,
        value: Some(Bytes::from(v)),
        headers: Vec::new(),
        timestamp: 1_700_000_000_000 + i as i64,
    }
}

/// One measured run: warm-up (one record per partition, every connection open, every
/// partition's state made), then `records` records, `window` per 1 ms tick.
fn run_cpu(
    partitions: usize,
    brokers: usize,
    in_flight: usize,
    records: usize,
    window: usize,
) -> Costs {
    let mut rig = Rig::new(partitions as i32, brokers, in_flight, 1 << 30);
    let warm: Vec<Record> = (0..partitions).map(|p| record(p as i32, 100, p)).collect();
    rig.send_all(warm);
    rig.settle();
    rig.costs = Costs::default();

    let mut all: Vec<Record> = (0..records)
        .map(|i| record((i % partitions) as i32, 100, i))
        .collect();
    let mut next = 0;
    while next < all.len() {
        let end = (next + window).min(all.len());
        let chunk: Vec<Record> = all[next..end].to_vec();
        next = end;
        rig.broker_answers();
        rig.send_all(chunk);
        rig.tick(Duration::from_millis(1));
    }
    all.clear();
    rig.settle();
    assert_eq!(
        rig.costs.delivered, records as u64,
        "every record delivered"
    );
    rig.costs
}

fn cpu(opts: &BTreeMap<String, String>) {
    let records = num(opts, "records", 200_000);
    let rounds = num(opts, "rounds", 3);
    let window = num(opts, "window", 1_000);
    let parts = list(opts, "partitions", &[1, 100, 1_000, 10_000]);
    let in_flights = list(opts, "in-flight", &[5, 1]);
    let brokers = list(opts, "brokers", &[1, 3]);
    println!(
        "kprod Producer vs kprod-model broker, in process: {records} records of 100 B, {window} \
         per 1 ms virtual tick, linger 5 ms, batch.size 16 KiB; producer calls only, best of \
         {rounds} rounds (wall time of the calls; 2 cores shared with other builds)"
    );
    println!(
        "{:>6} {:>3} {:>4} {:>9} {:>7} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "parts",
        "brk",
        "infl",
        "ns/rec",
        "ratio",
        "rec/bat",
        "ns/batch",
        "send ns",
        "poll ns",
        "read ns",
        "tmout ns",
        "polls/rec"
    );
    // One untimed round first: the process's first allocations and page faults.
    run_cpu(
        parts[0],
        brokers[0],
        in_flights[0],
        records.min(100_000),
        window,
    );
    let mut curves: Vec<Curve> = Vec::new();
    for &b in &brokers {
        for &f in &in_flights {
            let mut base: Option<f64> = None;
            let mut curve = Curve {
                label: format!("{b} broker{}, {f} in flight", if b == 1 { "" } else { "s" }),
                points: Vec::new(),
            };
            for &p in &parts {
                let best = (0..rounds)
                    .map(|_| run_cpu(p, b, f, records, window))
                    .min_by_key(Costs::total)
                    .expect("at least one round");
                let per_rec = best.total().as_nanos() as f64 / records as f64;
                let per_batch = best.total().as_nanos() as f64 / best.batches.max(1) as f64;
                curve.points.push((p as f64, per_rec, per_batch));
                let base = *base.get_or_insert(per_rec);
                println!(
                    "{:>6} {:>3} {:>4} {:>9.0} {:>6.2}x {:>8.1} {:>9.0} {:>8.0} {:>9.0} {:>9.0} {:>9.0} {:>9.2}",
                    p,
                    b,
                    f,
                    per_rec,
                    per_rec / base,
                    records as f64 / best.batches.max(1) as f64,
                    best.total().as_nanos() as f64 / best.batches.max(1) as f64,
                    best.send.ns_per_call(),
                    best.poll.ns_per_call(),
                    best.read.ns_per_call(),
                    best.timeout.ns_per_call(),
                    best.poll.calls as f64 / records as f64,
                );
            }
            curves.push(curve);
        }
    }
    if let Some(path) = opts.get("svg") {
        let title = format!(
            "kprod Producer, {records} records of 100 B, {window}/ms, best of {rounds} (bench-scaling cpu)"
        );
        std::fs::write(path, scaling_svg(&title, &curves)).expect("write the plot");
        println!("plot written to {path}");
    }
    println!(
        "ns/rec: every producer call's time / records; ratio: against the first \
         (1-partition) row of the same brokers and in-flight group; rec/bat: \
         records per Produce batch; *_ns: per call of send, poll_output (each output, the Wait \
         included), handle_read (one per connection per tick with answers), handle_timeout"
    );
}

/// One line of the scaling plot: (partitions, ns per record, ns per batch).
struct Curve {
    label: String,
    points: Vec<(f64, f64, f64)>,
}

/// Which figure of a point a panel plots.
type Axis = fn(&(f64, f64, f64)) -> f64;

/// Two log-log panels as an SVG document: ns per record and ns per Produce batch against
/// partitions, one line per brokers/in-flight group.
fn scaling_svg(title: &str, curves: &[Curve]) -> String {
    const W: f64 = 900.0;
    const H: f64 = 470.0;
    const COLORS: [&str; 6] = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    ];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        W / 2.0,
        xml_escape(title)
    );
    let panels: [(&str, Axis); 2] = [
        ("ns per record (all producer calls)", |p| p.1),
        ("ns per Produce batch (all producer calls)", |p| p.2),
    ];
    let xs: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .collect();
    let (x_lo, x_hi) = decades(&xs);
    for (i, (name, y_of)) in panels.iter().enumerate() {
        let left = 70.0 + i as f64 * (W / 2.0);
        let (top, width, height) = (50.0, W / 2.0 - 100.0, H - 160.0);
        let ys: Vec<f64> = curves
            .iter()
            .flat_map(|c| c.points.iter().map(y_of))
            .collect();
        let (y_lo, y_hi) = decades(&ys);
        let px = |x: f64| left + (x.log10() - x_lo) / (x_hi - x_lo) * width;
        let py = |y: f64| top + height - (y.max(1e-9).log10() - y_lo) / (y_hi - y_lo) * height;
        out.push_str(&format!(
            "<rect x=\"{left}\" y=\"{top}\" width=\"{width}\" height=\"{height}\" fill=\"none\" \
             stroke=\"#888\"/>\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{name}</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">partitions (log)</text>\n",
            left + width / 2.0,
            top - 8.0,
            left + width / 2.0,
            top + height + 36.0,
        ));
        for d in (x_lo as i32)..=(x_hi as i32) {
            let x = px(10f64.powi(d));
            out.push_str(&format!(
                "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#eee\"/>\n\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                top + height,
                top + height + 16.0,
                10u64.pow(d.max(0) as u32)
            ));
        }
        for d in (y_lo as i32)..=(y_hi as i32) {
            let y = py(10f64.powi(d));
            out.push_str(&format!(
                "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\n\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
                left + width,
                left - 6.0,
                y + 4.0,
                10u64.pow(d.max(0) as u32)
            ));
        }
        for (ci, c) in curves.iter().enumerate() {
            let color = COLORS[ci % COLORS.len()];
            let pts: Vec<String> = c
                .points
                .iter()
                .map(|p| format!("{:.1},{:.1}", px(p.0), py(y_of(p))))
                .collect();
            out.push_str(&format!(
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>\n",
                pts.join(" ")
            ));
            for p in &c.points {
                out.push_str(&format!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>\n",
                    px(p.0),
                    py(y_of(p))
                ));
            }
        }
    }
    for (ci, c) in curves.iter().enumerate() {
        let color = COLORS[ci % COLORS.len()];
        let x = 70.0 + (ci % 3) as f64 * 260.0;
        let y = H - 44.0 + (ci / 3) as f64 * 18.0;
        out.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"/>\n\
             <text x=\"{}\" y=\"{}\">{}</text>\n",
            x + 24.0,
            x + 30.0,
            y + 4.0,
            xml_escape(&c.label)
        ));
    }
    out.push_str("</svg>\n");
    out
}

/// The whole decades (log10) around the values.
fn decades(values: &[f64]) -> (f64, f64) {
    let logs = values.iter().filter(|v| **v > 0.0).map(|v| v.log10());
    let lo = logs.clone().fold(f64::INFINITY, f64::min).floor();
    let hi = logs.fold(f64::NEG_INFINITY, f64::max).ceil();
    if lo.is_finite() && hi.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn memory(opts: &BTreeMap<String, String>) {
    let records = num(opts, "records", 1_000_000);
    let size = num(opts, "size", 100);
    let partitions = num(opts, "partitions", 4);
    println!(
        "{records} records of {size} B, {partitions} partitions, broker not answering after the producer \
         is ready; one process per row (2 cores shared with other builds; RSS is not \
         load-dependent)"
    );
    println!(
        "{:>14} {:>10} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "buffer.memory",
        "accepted",
        "buffered B",
        "RSS before",
        "RSS after",
        "RSS delta",
        "B/record",
        "overhead"
    );
    let exe = std::env::current_exe().expect("own path");
    for buffer in [32usize << 20, 128 << 20, 1 << 30] {
        let out = Command::new(&exe)
            .args(["memory-case", "--records", &records.to_string()])
            .args(["--size", &size.to_string(), "--buffer", &buffer.to_string()])
            .args(["--partitions", &partitions.to_string()])
            .output()
            .expect("run memory case");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    println!(
        "RSS delta: VmRSS after the sends minus before the producer was made; B/record: delta / \
         accepted; overhead: B/record minus the {size} value bytes"
    );
}

fn memory_case(opts: &BTreeMap<String, String>) {
    let records = num(opts, "records", 1_000_000);
    let size = num(opts, "size", 100);
    let buffer = num(opts, "buffer", 1 << 30);
    let partitions = num(opts, "partitions", 4);
    let before = rss_bytes();
    let mut rig = Rig::new(partitions as i32, 1, 5, buffer);
    rig.send_all(vec![record(0, size, 0)]);
    rig.settle();
    rig.answering = false;
    let mut accepted = 0usize;
    let mut i = 0;
    'outer: while i < records {
        let end = (i + 10_000).min(records);
        for j in i..end {
            match rig
                .producer
                .send(rig.now, record((j % partitions) as i32, size, j))
            {
                Ok(_) => accepted += 1,
                Err(_) => break 'outer,
            }
        }
        rig.drain();
        i = end;
    }
    rig.drain();
    let after = rss_bytes();
    let delta = after.saturating_sub(before);
    let per = delta as f64 / accepted.max(1) as f64;
    println!(
        "{:>11} MiB {:>10} {:>12} {:>9.1} MiB {:>9.1} MiB {:>9.1} MiB {:>10.1} {:>10.1}",
        buffer >> 20,
        accepted,
        rig.producer.buffered_bytes(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        delta as f64 / 1048576.0,
        per,
        per - size as f64
    );
}

// ---------------------------------------------------------------------------------------------
// Latency against a real broker
// ---------------------------------------------------------------------------------------------

enum Broker {
    Tansu(Tansu),
    Kafka(Kafka),
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// `which` (tansu, or kafka: one node) with the topic of `partitions` partitions, and its
/// bootstrap address.
fn start_broker(which: &str, partitions: usize) -> (Broker, String) {
    let broker = match which {
        "tansu" => {
            let t = Tansu::start();
            t.create_topic(TOPIC, partitions as u32);
            Broker::Tansu(t)
        }
        "kafka" => {
            let k = Kafka::start(1);
            k.create_topic(TOPIC, partitions as i32, 1, None);
            Broker::Kafka(k)
        }
        other => panic!("--broker {other}: tansu or kafka"),
    };
    let bootstrap = match &broker {
        Broker::Tansu(t) => t.addr().to_string(),
        Broker::Kafka(k) => k.bootstrap(),
    };
    (broker, bootstrap)
}

fn latency(opts: &BTreeMap<String, String>) {
    let ticks = num(opts, "ticks", 5_000);
    let burst = num(opts, "burst", 50_000);
    let bursts = num(opts, "bursts", 3);
    let partitions = num(opts, "partitions", 3);
    let size = num(opts, "size", 100);
    let rounds = num(opts, "rounds", 2);
    let which = opts.get("broker").map_or("tansu", String::as_str);
    let clients: Vec<String> = opts
        .get("clients")
        .map_or("kprod,rdkafka,java", String::as_str)
        .split(',')
        .map(str::to_owned)
        .collect();
    for c in &clients {
        assert!(
            ["kprod", "rdkafka", "java", "franz"].contains(&c.as_str()),
            "--clients {c}: kprod, rdkafka, java or franz"
        );
    }
    let (broker, bootstrap) = start_broker(which, partitions);
    let rt = runtime();
    let version = match &broker {
        Broker::Tansu(_) => format!("Tansu {}", kprod_tests::TANSU_VERSION),
        Broker::Kafka(k) => format!("Apache Kafka {} (1 node)", k.version()),
    };
    let load = Load {
        ticks,
        burst,
        bursts,
        partitions,
        size,
    };
    println!(
        "{} on {version}: {ticks} ticker records (1 ms), {bursts} bursts of {burst} \
         overlapping sends, {partitions} partitions, {size} B, idempotent, acks=all, in flight \
         5, linger 5 ms, batch 16 KiB; {rounds} rounds, clients alternating within each round; \
         kprod and librdkafka keep one producer across rounds, Java runs a fresh JVM per round \
         (its JIT warms up during the run); 2 cores shared with the broker",
        clients.join(", ")
    );
    println!(
        "{:>6} {:>8} {:>8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "round",
        "client",
        "records",
        "count",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "max ms",
        "secs"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let row = |round: usize, client: &str, name: &str, l: &Latency, secs: f64| {
        println!(
            "{:>6} {:>8} {:>8} {:>9} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.1}",
            round,
            client,
            name,
            l.count,
            ms(l.mean),
            ms(l.p50),
            ms(l.p99),
            ms(l.p999),
            ms(l.max),
            secs
        );
    };
    // (client, stream) -> one Latency per round.
    let mut all: BTreeMap<(String, &str), Vec<Latency>> = BTreeMap::new();
    let (kprod, rdkafka) = rt.block_on(async {
        let kprod = if clients.iter().any(|c| c == "kprod") {
            let config = config_from_properties(&[
                ("bootstrap.servers", bootstrap.as_str()),
                ("client.id", "bench-scaling-latency"),
                ("acks", "all"),
                ("max.in.flight.requests.per.connection", "5"),
                ("linger.ms", "5"),
            ])
            .expect("config");
            let producer = Arc::new(ProducerHandle::connect(config).expect("producer"));
            let mut warm = Record::new(TOPIC, "warm-up");
            warm.partition = Some(0);
            producer.send(warm).await.expect("warm-up delivered");
            Some(Client::Kprod(producer))
        } else {
            None
        };
        let rdkafka = if clients.iter().any(|c| c == "rdkafka") {
            let producer: FutureProducer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("client.id", "bench-scaling-latency-rdkafka")
                .set("enable.idempotence", "true")
                .set("acks", "all")
                .set("max.in.flight.requests.per.connection", "5")
                .set("linger.ms", "5")
                .set("batch.size", "16384")
                .set("queue.buffering.max.messages", "10000000")
                .set("queue.buffering.max.kbytes", "2097151")
                .create()
                .expect("librdkafka producer");
            let client = Client::Rdkafka(Arc::new(producer));
            client
                .enqueue(0, Bytes::from_static(b"warm-up"))
                .await
                .await;
            Some(client)
        } else {
            None
        };
        (kprod, rdkafka)
    });
    for round in 1..=rounds {
        // Alternate the order from round to round.
        let mut order = clients.clone();
        if round % 2 == 0 {
            order.reverse();
        }
        for client in &order {
            let (tick, burst, secs) = match client.as_str() {
                "java" => java_seed_latency(&bootstrap, &load, which == "tansu"),
                "franz" => franz_seed_latency(&bootstrap, &load, which == "tansu"),
                name => {
                    let c = if name == "kprod" { &kprod } else { &rdkafka };
                    let c = c.as_ref().expect("client started");
                    let (t, b, elapsed) = rt.block_on(seed_load(c, &load));
                    (Latency::of(t), Latency::of(b), elapsed.as_secs_f64())
                }
            };
            row(round, client, "ticker", &tick, secs);
            row(round, client, "burst", &burst, secs);
            all.entry((client.clone(), "ticker"))
                .or_default()
                .push(tick);
            all.entry((client.clone(), "burst"))
                .or_default()
                .push(burst);
        }
    }
    println!();
    println!("medians over rounds (ms), and kprod's ratio to each client (lower is better):");
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>14} {:>14} {:>14} {:>14}",
        "client",
        "records",
        "mean",
        "p50",
        "p99",
        "p999",
        "kprod/it mean",
        "kprod/it p50",
        "kprod/it p99",
        "kprod/it p999"
    );
    let median = |v: &[Latency], f: fn(&Latency) -> Duration| {
        let mut x: Vec<Duration> = v.iter().map(f).collect();
        x.sort_unstable();
        x[x.len() / 2]
    };
    for ((client, stream), v) in &all {
        let q = [
            median(v, |l| l.mean),
            median(v, |l| l.p50),
            median(v, |l| l.p99),
            median(v, |l| l.p999),
        ];
        let ratio = |i: usize| {
            all.get(&("kprod".to_owned(), *stream))
                .map_or(String::from("-"), |k| {
                    let kq = [
                        median(k, |l| l.mean),
                        median(k, |l| l.p50),
                        median(k, |l| l.p99),
                        median(k, |l| l.p999),
                    ];
                    format!("{:.2}", kq[i].as_secs_f64() / q[i].as_secs_f64().max(1e-9))
                })
        };
        println!(
            "{:>8} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>14} {:>14} {:>14} {:>14}",
            client,
            stream,
            ms(q[0]),
            ms(q[1]),
            ms(q[2]),
            ms(q[3]),
            ratio(0),
            ratio(1),
            ratio(2),
            ratio(3)
        );
    }
    drop((kprod, rdkafka));
    drop(broker);
}

/// Percentiles of one stream kind of one run (nearest rank).
#[derive(Debug, Clone, Copy)]
struct Latency {
    count: usize,
    /// The mean: the percentiles of a ticker's records are bimodal (the record that opens a
    /// batch waits the whole linger, the others less), so the median can sit on either mode.
    mean: Duration,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
}

impl Latency {
    fn of(mut v: Vec<Duration>) -> Self {
        v.sort_unstable();
        let sum: Duration = v.iter().sum();
        Self {
            count: v.len(),
            mean: sum / u32::try_from(v.len().max(1)).unwrap_or(u32::MAX),
            p50: percentile(&v, 0.50),
            p99: percentile(&v, 0.99),
            p999: percentile(&v, 0.999),
            max: v.last().copied().unwrap_or_default(),
        }
    }
}

/// The Java producer (kafka-clients, `tests/java`'s `seed` command) under the same load, in
/// a JVM of its own; its percentiles as it measured them (send call to callback).
///
/// On Tansu the Java producer runs with `metadata.cluster.check.enable=false`: otherwise
/// kafka-clients 4.4 sends ApiVersions v5, which Tansu cannot decode (as in bench-e2e).
fn java_seed_latency(bootstrap: &str, load: &Load, tansu: bool) -> (Latency, Latency, f64) {
    let plan = seed_plan(load);
    let mut flags = javaref::Flags::default();
    if tansu {
        flags.extra.push((
            "metadata.cluster.check.enable".to_owned(),
            "false".to_owned(),
        ));
    }
    let run = javaref::run_seed(bootstrap, &plan, &flags, Duration::from_secs(600));
    seed_figures(&run, load, "the Java producer")
}

/// franz-go (`tests/go/franz-bench`'s `seed` command, which speaks the Java one's protocol)
/// under the same load, in a process of its own; its percentiles as it measured them (send
/// call to promise). On Tansu its request versions are capped at Kafka 3.9's (Tansu closes
/// the connection on ApiVersions v5).
fn franz_seed_latency(bootstrap: &str, load: &Load, tansu: bool) -> (Latency, Latency, f64) {
    let plan = seed_plan(load);
    let cap = tansu.then_some("3.9");
    let run = kprod_tests::franz::run_seed(bootstrap, &plan, 5, cap, Duration::from_secs(600));
    seed_figures(&run, load, "franz-go")
}

/// The seed plan of `load` for the Java and Go programs.
fn seed_plan(load: &Load) -> SeedPlan {
    SeedPlan {
        source: Source {
            topic: TOPIC.to_owned(),
            partitions: load.partitions as i32,
            run: fresh_run_id(),
            record_size: load.size,
        },
        ticks: load.ticks as u64,
        period: Duration::from_millis(1),
        bursts: load.bursts as u32,
        burst_size: load.burst as u64,
        resolve_timeout: Duration::from_secs(300),
    }
}

/// The percentiles and duration a seed run of the Java or Go program printed, after checking
/// that `who` delivered every record.
fn seed_figures(run: &javaref::JavaSeed, load: &Load, who: &str) -> (Latency, Latency, f64) {
    let stdout = &run.finished.stdout;
    let get = |stream| {
        let l = javaref::seed_latency(stdout, stream)
            .unwrap_or_else(|e| panic!("{who}'s seed run: {e}\n{stdout:?}"));
        Latency {
            count: l.count as usize,
            mean: l.mean,
            p50: l.p50,
            p99: l.p99,
            p999: l.p999,
            max: l.max,
        }
    };
    let (tick, burst) = (get("ticker"), get("burst"));
    assert!(
        run.finished.status.success()
            && tick.count == load.ticks
            && burst.count == load.bursts * load.burst,
        "{who} did not deliver every record ({} ticker, {} burst):\n{}",
        tick.count,
        burst.count,
        run.finished.describe("seed run")
    );
    (tick, burst, run.report.elapsed.as_secs_f64())
}

/// A client under the seed load: `enqueue` returns once the record is handed over, with a
/// future of its acknowledgement.
#[derive(Clone)]
enum Client {
    Kprod(Arc<ProducerHandle>),
    Rdkafka(Arc<FutureProducer>),
}

type Ack = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Client {
    async fn enqueue(&self, partition: i32, value: Bytes) -> Ack {
        match self {
            Client::Kprod(p) => {
                let mut r = Record::new(TOPIC, value);
                r.partition = Some(partition);
                let fut = p.enqueue(r).await.expect("enqueued");
                Box::pin(async move {
                    fut.await.expect("delivered");
                })
            }
            Client::Rdkafka(p) => {
                let rec = FutureRecord::<(), [u8]>::to(TOPIC)
                    .partition(partition)
                    .payload(&value[..]);
                let fut = p
                    .send_result(rec)
                    .map_err(|(e, _)| e)
                    .expect("librdkafka enqueued");
                Box::pin(async move {
                    fut.await
                        .expect("not cancelled")
                        .map_err(|(e, _)| e)
                        .expect("delivered");
                })
            }
        }
    }
}

/// The seed load's shape.
struct Load {
    ticks: usize,
    burst: usize,
    bursts: usize,
    partitions: usize,
    size: usize,
}

/// One run of the seed load: the ticker's and the bursts' latencies (enqueue call to
/// acknowledgement), and the run's duration.
async fn seed_load(client: &Client, load: &Load) -> (Vec<Duration>, Vec<Duration>, Duration) {
    let Load {
        ticks,
        burst,
        bursts,
        partitions,
        size,
    } = *load;
    let value = Bytes::from(vec![b'.'; size]);
    let start = Instant::now();

    // Bursts: at b * ticks / (bursts + 1) ms, each enqueues everything before awaiting.
    let mut burst_tasks = Vec::new();
    for b in 1..=bursts {
        let value = value.clone();
        let client = client.clone();
        let at = start + Duration::from_millis((b * ticks / (bursts + 1)) as u64);
        burst_tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let mut waits = Vec::with_capacity(burst);
            for i in 0..burst {
                let t0 = Instant::now();
                let ack = client.enqueue((i % partitions) as i32, value.clone()).await;
                waits.push(tokio::spawn(async move {
                    ack.await;
                    t0.elapsed()
                }));
            }
            let mut out = Vec::with_capacity(burst);
            for w in waits {
                out.push(w.await.expect("join"));
            }
            out
        }));
    }

    // The ticker: one record every 1 ms.
    let tick_lat = {
        let mut interval = tokio::time::interval(Duration::from_millis(1));
        let mut waits = Vec::with_capacity(ticks);
        for i in 0..ticks {
            interval.tick().await;
            let t0 = Instant::now();
            let ack = client.enqueue((i % partitions) as i32, value.clone()).await;
            waits.push(tokio::spawn(async move {
                ack.await;
                t0.elapsed()
            }));
        }
        let mut tick_lat = Vec::with_capacity(ticks);
        for w in waits {
            tick_lat.push(w.await.expect("join"));
        }
        tick_lat
    };
    let mut burst_lat = Vec::new();
    for b in burst_tasks {
        burst_lat.extend(b.await.expect("join"));
    }
    (tick_lat, burst_lat, start.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Steady run
// ---------------------------------------------------------------------------------------------

fn steady(opts: &BTreeMap<String, String>) {
    let seconds = num(opts, "seconds", 600);
    let rate = num(opts, "rate", 20_000);
    let size = num(opts, "size", 100);
    let partitions = num(opts, "partitions", 6);
    let which = opts.get("broker").map_or("tansu", String::as_str);
    let (broker, bootstrap) = start_broker(which, partitions);
    let rt = runtime();
    println!(
        "kprod-tokio on {which}: {rate} records/s of {size} B over {partitions} partitions for \
         {seconds} s (a send every 10 ms, every record awaited), idempotent, acks=all; VmRSS \
         sampled every second"
    );
    let acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The sampler: one VmRSS reading per second, on a thread of its own.
    let sampler = {
        let done = Arc::clone(&done);
        let acked = Arc::clone(&acked);
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            let start = Instant::now();
            let mut next = start;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                next += Duration::from_secs(1);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                samples.push((
                    rss_bytes(),
                    acked.load(std::sync::atomic::Ordering::Relaxed),
                ));
            }
            samples
        })
    };
    let failed = rt.block_on(async {
        let config = config_from_properties(&[
            ("bootstrap.servers", bootstrap.as_str()),
            ("client.id", "bench-scaling-steady"),
            ("acks", "all"),
            ("linger.ms", "5"),
        ])
        .expect("config");
        let producer = Arc::new(ProducerHandle::connect(config).expect("producer"));
        let value = Bytes::from(vec![b'.'; size]);
        let per_tick = (rate / 100).max(1);
        let mut interval = tokio::time::interval(Duration::from_millis(10));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut waiters = Vec::new();
        let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        for tick in 0..seconds * 100 {
            interval.tick().await;
            let mut futs = Vec::with_capacity(per_tick);
            for i in 0..per_tick {
                let mut r = Record::new(TOPIC, value.clone());
                r.partition = Some(((tick * per_tick + i) % partitions) as i32);
                futs.push(producer.enqueue(r).await.expect("enqueued"));
            }
            let (acked, failed) = (Arc::clone(&acked), Arc::clone(&failed));
            waiters.push(tokio::spawn(async move {
                for f in futs {
                    let ok = f.await.is_ok();
                    let counter = if ok { &acked } else { &failed };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }));
            // Keep the list of waiters short: drop the finished ones now and then.
            if waiters.len() >= 1_000 {
                waiters.retain(|w| !w.is_finished());
            }
        }
        for w in waiters {
            w.await.expect("join");
        }
        let failed = failed.load(std::sync::atomic::Ordering::Relaxed);
        Arc::into_inner(producer)
            .expect("the only handle")
            .close()
            .await;
        failed
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
    println!(
        "{:>6} {:>12} {:>12} {:>14}",
        "minute", "min RSS MiB", "max RSS MiB", "acked by end"
    );
    let minutes: Vec<&[(usize, u64)]> = samples.chunks(60).collect();
    for (m, chunk) in minutes.iter().enumerate() {
        let min = chunk.iter().map(|s| s.0).min().unwrap_or(0);
        let max = chunk.iter().map(|s| s.0).max().unwrap_or(0);
        let acked_by = chunk.last().map_or(0, |s| s.1);
        println!(
            "{:>6} {:>12.1} {:>12.1} {:>14}",
            m + 1,
            mib(min),
            mib(max),
            acked_by
        );
    }
    let all_min = samples.iter().map(|s| s.0).min().unwrap_or(0);
    let all_max = samples.iter().map(|s| s.0).max().unwrap_or(0);
    let first_max = minutes
        .first()
        .map_or(0, |c| c.iter().map(|s| s.0).max().unwrap_or(0));
    let last_max = minutes
        .last()
        .map_or(0, |c| c.iter().map(|s| s.0).max().unwrap_or(0));
    println!(
        "{} samples: RSS min {:.1} MiB, max {:.1} MiB; max of the first minute {:.1} MiB, of the \
         last {:.1} MiB ({:+.1} MiB); {} records acknowledged, {failed} failed",
        samples.len(),
        mib(all_min),
        mib(all_max),
        mib(first_max),
        mib(last_max),
        mib(last_max) - mib(first_max),
        acked.load(std::sync::atomic::Ordering::Relaxed)
    );
    drop(broker);
}
