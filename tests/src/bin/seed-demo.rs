//! The seed scenario as a demonstration: kprod sends one record every millisecond while bursts
//! of overlapping sends go to several partitions (the load under which a KafkaJS idempotent
//! producer lost records and died with OUT_OF_ORDER_SEQUENCE_NUMBER), then an independent reader
//! (librdkafka's consumer) reads the topic back and the verdict compares, record by record, what
//! kprod reported with what the log holds.
//!
//! ```text
//! cargo run --release -p kprod-tests --bin seed-demo -- [--brokers host:port] [--records N]
//!     [--burst N] [--bursts N] [--partitions N] [--record-size BYTES] [--topic NAME]
//!     [--replication N]
//! ```
//!
//! With `--kafka` it starts a local 3-node Apache Kafka cluster (`scripts/install-kafka.sh`,
//! KRaft, topic replicated 3 times with `min.insync.replicas=2`) and, halfway through the
//! ticker's run, SIGKILLs the leader of partition 0 and restarts it once the leadership has
//! moved.
//!
//! Without `--brokers` or `--kafka` it starts a local Tansu broker (`scripts/install-tansu.sh`, or
//! `KPROD_TANSU=/path/to/tansu`) with in-memory storage and creates the topic with the Tansu CLI.
//! With `--brokers` it creates the topic with a CreateTopics request (librdkafka's admin
//! client); the principal must be allowed to create topics. To use a topic that already exists,
//! pass `--topic NAME`: its partition count is then taken from the broker's metadata, and
//! records of earlier runs in it are recognised by their run id and ignored.
//!
//! Exit status: 0 if the verdict is correct, 1 if any record is duplicated, out of order,
//! acknowledged but missing or misplaced, failed as not persisted yet present, or unresolved;
//! 2 for a usage or setup error.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kprod_tests::kafka::KAFKA_VERSION;
use kprod_tests::reader::read_topic;
use kprod_tests::seed::{fresh_run_id, run_seed, SeedPlan, Source, Verdict, TICKER_STREAM};
use kprod_tests::{Kafka, Tansu, TANSU_VERSION};
use kprod_tokio::{config_from_properties, ProducerHandle};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;

const USAGE: &str = "\
usage: seed-demo [--kafka | --brokers host:port] [--records N] [--burst N] [--bursts N]
                 [--partitions N] [--record-size BYTES] [--topic NAME] [--replication N]

  --kafka        start a local 3-node Apache Kafka and kill a leader halfway
  --brokers      use this Kafka-compatible cluster instead of starting a local Tansu
  --records      records the ticker sends, one every 1 ms (default 5000)
  --burst        records per burst, all enqueued before any is awaited (default 50000)
  --bursts       bursts during the ticker's run (default 3)
  --partitions   partitions of the topic created (default 3)
  --record-size  value size in bytes (default 100)
  --topic        topic name (default: kprod-seed-<run id>, created by the demo)
  --replication  replication factor when creating the topic on --brokers (default 1)";

/// How long records may take to resolve once their stream has enqueued everything.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the reader may take.
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `close()` may take once every record resolved.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Args {
    kafka: bool,
    brokers: Option<String>,
    records: u64,
    burst: u64,
    bursts: u32,
    partitions: i32,
    record_size: usize,
    topic: Option<String>,
    replication: i32,
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{name}: {v:?} is not a valid number"))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        kafka: false,
        brokers: None,
        records: 5_000,
        burst: 50_000,
        bursts: 3,
        partitions: 3,
        record_size: 100,
        topic: None,
        replication: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        if flag == "--kafka" {
            a.kafka = true;
            continue;
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (flag.clone(), None),
        };
        const FLAGS: [&str; 8] = [
            "--brokers",
            "--records",
            "--burst",
            "--bursts",
            "--partitions",
            "--record-size",
            "--topic",
            "--replication",
        ];
        if !FLAGS.contains(&name.as_str()) {
            return Err(format!("unknown option {name}"));
        }
        let value = inline
            .or_else(|| it.next())
            .ok_or_else(|| format!("{name} needs a value"))?;
        match name.as_str() {
            "--brokers" => a.brokers = Some(value),
            "--records" => a.records = num(&name, &value)?,
            "--burst" => a.burst = num(&name, &value)?,
            "--bursts" => a.bursts = num(&name, &value)?,
            "--partitions" => a.partitions = num(&name, &value)?,
            "--record-size" => a.record_size = num(&name, &value)?,
            "--topic" => a.topic = Some(value),
            "--replication" => a.replication = num(&name, &value)?,
            _ => return Err(format!("unknown option {name}")),
        }
    }
    if a.kafka && a.brokers.is_some() {
        return Err("--kafka and --brokers exclude each other".into());
    }
    if a.partitions < 1 {
        return Err("--partitions must be at least 1".into());
    }
    if a.records < 1 {
        return Err("--records must be at least 1".into());
    }
    Ok(a)
}

/// Creates `topic` on `brokers`, or finds it. Returns its partition count.
fn create_or_find_topic(
    rt: &tokio::runtime::Runtime,
    brokers: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
    must_create: bool,
) -> Result<i32, String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| format!("cannot create the admin client: {e}"))?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    let opts = AdminOptions::new()
        .request_timeout(Some(Duration::from_secs(15)))
        .operation_timeout(Some(Duration::from_secs(15)));
    let results = rt
        .block_on(admin.create_topics([&new], &opts))
        .map_err(|e| format!("CreateTopics to {brokers} failed (is the broker reachable?): {e}"))?;
    match results.into_iter().next() {
        Some(Ok(_)) => {
            println!("created topic {topic} with {partitions} partitions on {brokers}");
            Ok(partitions)
        }
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) if !must_create => {
            let md = admin
                .inner()
                .fetch_metadata(Some(topic), Duration::from_secs(30))
                .map_err(|e| format!("cannot read metadata of {topic}: {e}"))?;
            let n = md
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .map_or(0, |t| t.partitions().len() as i32);
            if n < 1 {
                return Err(format!("topic {topic} exists but has no partitions"));
            }
            println!("using existing topic {topic} with {n} partitions on {brokers}");
            Ok(n)
        }
        Some(Err((_, code))) => Err(format!(
            "cannot create topic {topic} on {brokers}: {code}. Create it beforehand \
             (with at least 3 partitions) and pass --topic {topic}"
        )),
        None => Err("CreateTopics returned no result".into()),
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("seed-demo: {e}\n");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("seed-demo: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, String> {
    let started = Instant::now();
    let log_counts = kprod_tests::log_counter::install();
    let run_id = fresh_run_id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
    let topic = args
        .topic
        .clone()
        .unwrap_or_else(|| format!("kprod-seed-{run_id:016x}"));

    println!("kprod seed demo: an idempotent producer under the KafkaJS seed load");
    // Keep the broker alive until the verdict is in.
    let mut kafka = None;
    let (_tansu, brokers, partitions) = match &args.brokers {
        None if args.kafka => {
            let t0 = Instant::now();
            let k = Kafka::start(3);
            println!(
                "started Apache Kafka {KAFKA_VERSION} (3 KRaft nodes, {}) at {} in {:.0?}",
                Kafka::install_dir().display(),
                k.bootstrap(),
                t0.elapsed()
            );
            k.create_topic(&topic, args.partitions, 3, Some(2));
            println!(
                "created topic {topic} with {} partitions, replication 3, min.insync.replicas=2",
                args.partitions
            );
            let brokers = k.bootstrap();
            kafka = Some(k);
            (None, brokers, args.partitions)
        }
        None => {
            let t0 = Instant::now();
            let tansu = Tansu::start();
            println!(
                "started Tansu {TANSU_VERSION} ({}) at {} in {:.0?}, in-memory storage",
                Tansu::binary().display(),
                tansu.addr(),
                t0.elapsed()
            );
            tansu.create_topic(&topic, args.partitions as u32);
            println!(
                "created topic {topic} with {} partitions (tansu topic create)",
                args.partitions
            );
            let brokers = tansu.addr().to_string();
            (Some(tansu), brokers, args.partitions)
        }
        Some(brokers) => {
            let n = create_or_find_topic(
                &rt,
                brokers,
                &topic,
                args.partitions,
                args.replication,
                args.topic.is_none(),
            )?;
            (None, brokers.clone(), n)
        }
    };
    if partitions < 3 {
        println!("note: fewer than 3 partitions; the seed scenario spreads bursts over at least 3");
    }

    let plan = SeedPlan {
        source: Source {
            topic: topic.clone(),
            partitions,
            run: run_id,
            record_size: args.record_size,
        },
        ticks: args.records,
        period: Duration::from_millis(1),
        bursts: args.bursts,
        burst_size: args.burst,
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let properties = [
        ("bootstrap.servers", brokers.as_str()),
        ("client.id", "kprod-seed-demo"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("max.in.flight.requests.per.connection", "5"),
        ("linger.ms", "5"),
    ];
    println!(
        "producer: {}",
        properties
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "load: ticker {} records, one every 1 ms, round-robin over {partitions} partitions; \
         {} bursts of {} overlapping enqueue()s ({}-byte values) round-robin over the same \
         partitions, starting at ticks {}",
        plan.ticks,
        plan.bursts,
        plan.burst_size,
        plan.source.record_size,
        (1..=u64::from(plan.bursts))
            .map(|b| (b * plan.ticks / (u64::from(plan.bursts) + 1)).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let config =
        config_from_properties(&properties).map_err(|e| format!("producer properties: {e}"))?;

    // With --kafka: halfway through the ticker's run, kill the leader of partition 0, wait
    // for the leadership to move, and restart it, while the load goes on.
    let fault = kafka.take().map(|mut k| {
        let topic = topic.clone();
        let halfway = Duration::from_millis(plan.ticks / 2);
        std::thread::spawn(move || {
            std::thread::sleep(halfway);
            let leader = k.leader(&topic, 0);
            let t0 = Instant::now();
            k.kill(leader);
            let moved_to = k.wait_leader_moved(&topic, 0, leader);
            let moved = t0.elapsed();
            k.restart(leader);
            let line = format!(
                "fault: SIGKILLed node {leader} (leader of partition 0) after {halfway:.0?}; \
                 leadership moved to node {moved_to} after {moved:.2?}; node {leader} back \
                 after {:.2?}",
                t0.elapsed()
            );
            (k, line)
        })
    });
    let report = rt.block_on(async {
        let producer = ProducerHandle::connect(config).map_err(|e| format!("config: {e}"))?;
        let report = run_seed(&producer, &plan).await;
        tokio::time::timeout(CLOSE_TIMEOUT, producer.close())
            .await
            .map_err(|_| format!("close() did not finish within {CLOSE_TIMEOUT:?}"))?;
        Ok::<_, String>(report)
    })?;
    drop(rt);
    let _kafka = match fault {
        Some(handle) => {
            let (k, line) = handle
                .join()
                .map_err(|_| "the leader-kill thread panicked".to_owned())?;
            println!("{line}");
            Some(k)
        }
        None => None,
    };

    let ticker_sent = report
        .sent
        .iter()
        .filter(|s| s.tag.stream == TICKER_STREAM)
        .count();
    println!(
        "ticker: {ticker_sent} records in {:.2?}",
        report.ticker_time
    );
    for (i, b) in report.bursts.iter().enumerate() {
        println!(
            "burst {i}: {} records ({:.2} MB) enqueued in {:.2?}, all resolved after {:.2?}: \
             {:.0} records/s, {:.2} MB/s; started at tick {}, {} ticker sends during it",
            b.records,
            b.bytes as f64 / 1e6,
            b.enqueue_time,
            b.duration,
            b.records as f64 / b.duration.as_secs_f64(),
            b.bytes as f64 / 1e6 / b.duration.as_secs_f64(),
            b.ticks_at_start,
            b.ticks_during
        );
    }
    println!(
        "every record resolved {:.2?} after the start",
        report.elapsed
    );
    let counts = log_counts.lock().unwrap().clone();
    let count = |m: &str| {
        counts
            .iter()
            .filter(|(k, _)| k.starts_with(m))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    println!(
        "producer log: {} connection(s), {} producer id(s), {} batch retries, {} epoch bumps, \
         {} disconnects, {} fatal",
        count("connected"),
        count("producer id"),
        count("batch retry"),
        count("epoch bumped"),
        count("disconnected"),
        count("producer failed")
    );
    for (event, n) in counts.iter().filter(|(k, _)| {
        k.starts_with("batch retry")
            || k.starts_with("disconnected")
            || k.starts_with("producer failed")
            || k.starts_with("broker lost")
    }) {
        println!("  {n} x {event}");
    }

    let t0 = Instant::now();
    let log = read_topic(&brokers, &topic, partitions, READ_TIMEOUT)
        .map_err(|e| format!("the independent reader failed: {e}"))?;
    let read: usize = log.values().map(Vec::len).sum();
    println!(
        "independent reader (librdkafka consumer): {read} records from {partitions} partitions \
         in {:.2?}",
        t0.elapsed()
    );

    let v = Verdict::compute(run_id, partitions, &report.sent, &log);
    println!();
    println!("verdict for topic {topic} (run {run_id:016x}):");
    print!("{v}");
    println!(
        "  burst throughput               {:>9.0} records/s, {:.2} MB/s",
        report.burst_records_per_sec(),
        report.burst_mb_per_sec()
    );
    println!(
        "  elapsed                        {:>9.2?}",
        started.elapsed()
    );
    let ok = v.is_correct();
    if ok && v.is_complete() {
        println!("PASS: every record acknowledged, present once, in order, at its offset");
    } else if ok {
        println!(
            "PASS: no duplicate, reorder or missing acknowledged record; {} records failed \
             with a truthful status",
            v.failed()
        );
    } else {
        println!("FAIL: see the counts above");
    }
    Ok(ok)
}
