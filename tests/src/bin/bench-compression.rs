//! Compressed produce throughput: kprod-tokio against librdkafka (the `rdkafka` crate) with the
//! same codec and level, both to the same local Apache Kafka 4.4.0 node.
//!
//! ```text
//! cargo run --release -p kprod-tests --bin bench-compression -- \
//!     [--messages N] [--rounds R] [--size BYTES] [--codecs none,gzip,snappy,lz4,zstd] \
//!     [--batch-size BYTES] [--linger-ms MS]
//! ```
//!
//! Each round, for each codec, each client produces the same N text-like records (a JSON-ish
//! line of about `--size` bytes with a key) to its own fresh 4-partition topic, idempotent,
//! `acks=all`, `linger.ms=5` and `batch.size=16384` (or the flags'), and a queue large enough that neither
//! client blocks. Measured from the first send to the last acknowledgement: records/s, MB/s of
//! uncompressed keys and values in, client CPU per record (`utime + stime` of this process;
//! the broker is a separate process), bytes per record in the broker's log (the log
//! segments' size over N: the compressed size on disk), and how long the application waited
//! to hand a record over (`enqueue().await` for kprod, `send` for rdkafka: p99.9 and the
//! longest, which show the client's locks held against the application). Levels: gzip 6 and zstd 3 (Kafka's
//! defaults) for both clients; snappy has none; lz4 is each client's fast mode. The medians
//! over the rounds are printed as a Markdown table.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kprod_core::Record;
use kprod_tests::e2e::runtime;
use kprod_tests::Kafka;
use kprod_tokio::{config_from_properties, ProducerHandle};
use rdkafka::config::ClientConfig;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer as _, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

const PARTITIONS: i32 = 4;

struct Args {
    messages: u64,
    rounds: usize,
    size: usize,
    codecs: Vec<String>,
    /// `batch.size` for both clients (16,384 unless `--batch-size`).
    batch_size: String,
    /// `linger.ms` for both clients (5 unless `--linger-ms`).
    linger_ms: String,
}

fn parse_args() -> Args {
    let mut a = Args {
        messages: 200_000,
        rounds: 3,
        size: 200,
        codecs: ["none", "gzip", "snappy", "lz4", "zstd"]
            .map(str::to_owned)
            .to_vec(),
        batch_size: "16384".to_owned(),
        linger_ms: "5".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => a.messages = value.parse().expect("--messages N"),
            "--rounds" => a.rounds = value.parse().expect("--rounds R"),
            "--size" => a.size = value.parse().expect("--size BYTES"),
            "--codecs" => a.codecs = value.split(',').map(str::to_owned).collect(),
            "--batch-size" => a.batch_size = value,
            "--linger-ms" => a.linger_ms = value,
            _ => panic!("unknown flag {flag}"),
        }
    }
    a
}

/// Kafka's default level for the codec, given to both clients; `None` for codecs without one
/// (lz4 runs each client's fast compressor).
fn level(codec: &str) -> Option<&'static str> {
    match codec {
        "gzip" => Some("6"),
        "zstd" => Some("3"),
        _ => None,
    }
}

/// Record `i`: a key of 1,000 users and a JSON-ish value padded to about `size` bytes.
fn record(i: u64, size: usize) -> (Vec<u8>, Vec<u8>) {
    let key = format!("user-{}", i % 1000).into_bytes();
    let mut value = format!(
        r#"{{"id":{i},"user":"user-{}","event":"{}","page":"/products/{}","amount":{}.{:02},"tags":["#,
        i % 1000,
        ["click", "view", "purchase", "scroll"][(i % 4) as usize],
        (i * 7919) % 977,
        (i * 31) % 500,
        i % 100
    );
    let mut n = 0;
    while value.len() + 3 < size {
        value.push_str(&format!("\"t{}\",", (i + n) % 53));
        n += 1;
    }
    value.push_str("\"\"]}");
    (key, value.into_bytes())
}

fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let rest = stat.rsplit_once(')').expect("stat").1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

fn clock_ticks_per_second() -> u64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf CLK_TCK");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK")
}

#[derive(Debug, Clone)]
struct Sample {
    wall: Duration,
    cpu: Duration,
    log_bytes: u64,
    /// How long each hand-over of a record (`enqueue().await`, rdkafka's `send`) took, sorted.
    waits: Vec<Duration>,
}

impl Sample {
    /// The `q` quantile of the hand-over times, in µs.
    fn wait_us(&self, q: f64) -> f64 {
        let i = ((self.waits.len() as f64 * q) as usize).min(self.waits.len() - 1);
        self.waits[i].as_secs_f64() * 1e6
    }
}

fn log_bytes(kafka: &Kafka, topic: &str) -> u64 {
    (0..PARTITIONS)
        .map(|p| {
            let dir = kafka.dir().join("node-1/data").join(format!("{topic}-{p}"));
            std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum::<u64>()
        })
        .sum()
}

fn run_kprod(kafka: &Kafka, topic: &str, codec: &str, a: &Args, tick: Duration) -> Sample {
    let brokers = kafka.bootstrap();
    let mut props = vec![
        ("bootstrap.servers", brokers.as_str()),
        ("linger.ms", a.linger_ms.as_str()),
        ("batch.size", a.batch_size.as_str()),
        ("buffer.memory", "268435456"),
        ("compression.type", codec),
    ];
    if let Some(l) = level(codec) {
        props.push(("compression.level", l));
    }
    let config = config_from_properties(&props).expect("valid properties");
    let records: Vec<(Bytes, Bytes)> = (0..a.messages)
        .map(|i| {
            let (k, v) = record(i, a.size);
            (Bytes::from(k), Bytes::from(v))
        })
        .collect();
    let rt = runtime();
    rt.block_on(async {
        let producer = ProducerHandle::connect(config).expect("valid config");
        // Warm: metadata, producer id and connections before the clock starts.
        let mut warm = Record::new(topic, "warm-up");
        warm.partition = Some(0);
        producer.send(warm).await.expect("warm-up record");
        let (c0, t0) = (cpu_ticks(), Instant::now());
        let mut futures = Vec::with_capacity(records.len());
        let mut waits = Vec::with_capacity(records.len());
        for (k, v) in records {
            let mut r = Record::new(topic, v);
            r.key = Some(k);
            let t = Instant::now();
            futures.push(producer.enqueue(r).await.expect("accepted"));
            waits.push(t.elapsed());
        }
        for f in futures {
            f.await.expect("delivered");
        }
        let wall = t0.elapsed();
        let cpu = tick * (cpu_ticks() - c0) as u32;
        producer.close().await;
        waits.sort();
        Sample {
            wall,
            cpu,
            log_bytes: 0,
            waits,
        }
    })
}

struct Counter {
    ok: AtomicU64,
    failed: AtomicU64,
}

struct Ctx(Arc<Counter>);

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => self.0.ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.0.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

fn run_rdkafka(kafka: &Kafka, topic: &str, codec: &str, a: &Args, tick: Duration) -> Sample {
    let counter = Arc::new(Counter {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", kafka.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", &a.linger_ms)
        .set("batch.size", &a.batch_size)
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "262144")
        .set("compression.type", codec);
    if let Some(l) = level(codec) {
        cfg.set("compression.level", l);
    }
    let producer: ThreadedProducer<Ctx> = cfg
        .create_with_context(Ctx(counter.clone()))
        .expect("rdkafka producer");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..a.messages).map(|i| record(i, a.size)).collect();
    producer
        .send(
            BaseRecord::to(topic)
                .partition(0)
                .payload("warm-up")
                .key(""),
        )
        .map_err(|(e, _)| e)
        .expect("warm-up record");
    producer
        .flush(Duration::from_secs(60))
        .expect("warm-up flush");
    let base = counter.ok.load(Ordering::Relaxed);
    let (c0, t0) = (cpu_ticks(), Instant::now());
    let mut waits = Vec::with_capacity(records.len());
    for (k, v) in &records {
        let t = Instant::now();
        producer
            .send(BaseRecord::to(topic).key(k).payload(v))
            .map_err(|(e, _)| e)
            .expect("enqueued");
        waits.push(t.elapsed());
    }
    waits.sort();
    producer.flush(Duration::from_secs(300)).expect("flush");
    let wall = t0.elapsed();
    let cpu = tick * (cpu_ticks() - c0) as u32;
    assert_eq!(
        counter.failed.load(Ordering::Relaxed),
        0,
        "rdkafka failures"
    );
    assert_eq!(
        counter.ok.load(Ordering::Relaxed) - base,
        a.messages,
        "rdkafka: every record acknowledged"
    );
    Sample {
        wall,
        cpu,
        log_bytes: 0,
        waits,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let a = parse_args();
    let tick = Duration::from_secs(1) / clock_ticks_per_second() as u32;
    let kafka = Kafka::start(1);
    let input_bytes: u64 = (0..a.messages)
        .map(|i| {
            let (k, v) = record(i, a.size);
            (k.len() + v.len()) as u64
        })
        .sum();
    println!(
        "{} records of {:.0} bytes (key + value) per run, {} rounds, Apache Kafka 4.4.0, 1 node",
        a.messages,
        input_bytes as f64 / a.messages as f64,
        a.rounds
    );
    let mut rows = Vec::new();
    for codec in &a.codecs {
        let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
        for round in 0..a.rounds {
            // Alternate which client goes first.
            let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for c in order {
                let client = ["kprod", "rdkafka"][c];
                let topic = format!("bench-{codec}-{client}-{round}");
                kafka.create_topic(&topic, PARTITIONS, 1, None);
                let mut s = if c == 0 {
                    run_kprod(&kafka, &topic, codec, &a, tick)
                } else {
                    run_rdkafka(&kafka, &topic, codec, &a, tick)
                };
                s.log_bytes = log_bytes(&kafka, &topic);
                println!(
                    "{codec:>6} {client:>7} round {round}: {:.0} records/s, {:.1} MB/s in, \
                     {:.2} µs CPU/record, {:.1} B/record in the log, hand-over p99.9 {:.0} µs \
                     max {:.0} µs",
                    a.messages as f64 / s.wall.as_secs_f64(),
                    input_bytes as f64 / s.wall.as_secs_f64() / 1e6,
                    s.cpu.as_secs_f64() * 1e6 / a.messages as f64,
                    s.log_bytes as f64 / a.messages as f64,
                    s.wait_us(0.999),
                    s.wait_us(1.0),
                );
                samples[c].push(s);
            }
        }
        for (c, client) in ["kprod", "rdkafka"].iter().enumerate() {
            let s = &samples[c];
            let rps = median(
                s.iter()
                    .map(|x| a.messages as f64 / x.wall.as_secs_f64())
                    .collect(),
            );
            let mbs = median(
                s.iter()
                    .map(|x| input_bytes as f64 / x.wall.as_secs_f64() / 1e6)
                    .collect(),
            );
            let cpu = median(
                s.iter()
                    .map(|x| x.cpu.as_secs_f64() * 1e6 / a.messages as f64)
                    .collect(),
            );
            let log = median(
                s.iter()
                    .map(|x| x.log_bytes as f64 / a.messages as f64)
                    .collect(),
            );
            let p999 = median(s.iter().map(|x| x.wait_us(0.999)).collect());
            let max = median(s.iter().map(|x| x.wait_us(1.0)).collect());
            rows.push(format!(
                "| {codec} | {} | {client} | {rps:.0} | {mbs:.1} | {cpu:.2} | {log:.1} | \
                 {p999:.0} / {max:.0} |",
                level(codec).unwrap_or("—")
            ));
        }
    }
    println!(
        "\n| codec | level | client | records/s | MB/s in | CPU µs/record | log B/record | \
         hand-over p99.9 / max µs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
