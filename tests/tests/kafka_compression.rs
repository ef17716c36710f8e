//! Record batch compression against Apache Kafka 4.4.0 (one KRaft node).
//!
//! For every codec (none, gzip, snappy, lz4, zstd) kprod-tokio produces keyed records with
//! headers and explicit timestamps. Kafka must accept every batch (a wrongly framed batch is
//! refused with CORRUPT_MESSAGE or INVALID_RECORD: the broker decompresses each batch to
//! validate it), the partition's log segment must hold batches of that codec (Kafka's
//! `DumpLogSegments`), and two independent consumers must read every record back intact at
//! its acknowledged offset: librdkafka's (`kprod_tests::reader::read_topic_full`) and Kafka's
//! own `KafkaConsumer` (`tests/java-codec/KafkaCodec.java consume`).
//!
//! A second test makes the broker refuse compressed batches as too large
//! (`max.message.bytes`), so kprod splits them: each half is re-derived from the sent bytes
//! and compressed again, with its sequence range reused, until the pieces fit.
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; fails if Kafka cannot start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kprod_core::{Header, Metrics, Record};
use kprod_tests::e2e::{close, runtime};
use kprod_tests::reader::{read_topic_full, FullRecord};
use kprod_tests::Kafka;
use kprod_tokio::{config_from_properties, ProducerHandle};

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const PARTITIONS: i32 = 2;
/// Tasks handing records over to one producer at once.
const TASKS: usize = 4;
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A minute ago, fixed for the process: recent enough that time-based retention (7 days)
/// does not delete the segments under the readers.
fn base_ts() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970");
        now.as_millis() as i64 - 60_000
    })
}

/// Record `i` of a run: every 7th has no key, every 11th no value, every record two headers
/// (one with a null value), timestamps not monotonic.
fn record(topic: &str, i: usize) -> Record {
    let key = (!i.is_multiple_of(7)).then(|| Bytes::from(format!("key-{i}")));
    let value = (!i.is_multiple_of(11)).then(|| {
        Bytes::from(format!(
            "value {i}: {}",
            "compressible text, ".repeat(1 + i % 20)
        ))
    });
    Record {
        topic: topic.into(),
        partition: Some((i % PARTITIONS as usize) as i32),
        key,
        value,
        headers: vec![
            Header {
                key: "index".into(),
                value: Some(Bytes::from(i.to_string())),
            },
            Header {
                key: "nothing".into(),
                value: None,
            },
        ],
        timestamp: base_ts() + (i as i64 * 37) % 1000,
    }
}

/// The read-back form of `record(i)`.
fn expected(topic: &str, i: usize, partition: i32, offset: i64) -> FullRecord {
    let r = record(topic, i);
    FullRecord {
        partition,
        offset,
        timestamp: Some(r.timestamp),
        key: r.key.map(|b| b.to_vec()),
        value: r.value.map(|b| b.to_vec()),
        headers: r
            .headers
            .into_iter()
            .map(|h| (h.key, h.value.map(|v| v.to_vec())))
            .collect(),
    }
}

/// Produces `n` records to `topic` with `props` added; returns each record's (partition,
/// offset), asserting that every one was delivered with an offset.
fn produce(
    kafka: &Kafka,
    topic: &str,
    n: usize,
    props: &[(&str, &str)],
) -> (Vec<(i32, i64)>, Metrics) {
    let brokers = kafka.bootstrap();
    let mut all = vec![
        ("bootstrap.servers", brokers.as_str()),
        ("client.id", "kprod-compression"),
        ("linger.ms", "10"),
    ];
    all.extend_from_slice(props);
    let config = config_from_properties(&all).expect("valid properties");
    runtime().block_on(async {
        let producer = ProducerHandle::connect(config).expect("valid config");
        // Several tasks hand records over at once, while the driver compresses outside the
        // lock they take (compression ahead of the seal): task `k` sends records k, k + TASKS, ...
        let mut tasks = Vec::new();
        for k in 0..TASKS {
            let (producer, topic) = (producer.clone(), topic.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut futures = Vec::new();
                for i in (k..n).step_by(TASKS) {
                    let f = producer.enqueue(record(&topic, i)).await.expect("accepted");
                    futures.push((i, f));
                }
                let mut placed = Vec::with_capacity(futures.len());
                for (i, f) in futures {
                    let d = tokio::time::timeout(Duration::from_secs(120), f)
                        .await
                        .unwrap_or_else(|_| panic!("{topic}: record {i} unresolved after 120 s"))
                        .unwrap_or_else(|e| panic!("{topic}: record {i} failed: {e}"));
                    let offset = d.offset.unwrap_or_else(|| {
                        panic!("{topic}: record {i} acknowledged without an offset")
                    });
                    placed.push((i, d.partition, offset));
                }
                placed
            }));
        }
        let mut placed = vec![(-1, -1); n];
        for t in tasks {
            for (i, p, o) in t.await.expect("a sending task") {
                placed[i] = (p, o);
            }
        }
        // Each task's records are in the log in the order it handed them over.
        for k in 0..TASKS {
            for p in 0..PARTITIONS {
                let offsets: Vec<i64> = (k..n)
                    .step_by(TASKS)
                    .filter(|&i| placed[i].0 == p)
                    .map(|i| placed[i].1)
                    .collect();
                assert!(
                    offsets.windows(2).all(|w| w[0] < w[1]),
                    "{topic}-{p}: task {k}'s records out of order: {offsets:?}"
                );
            }
        }
        let metrics = producer.metrics().await;
        close(producer).await;
        (placed, metrics)
    })
}

/// Asserts that `got` holds exactly the `placed` records, each intact at its offset.
fn assert_read_back(reader: &str, topic: &str, placed: &[(i32, i64)], got: Vec<FullRecord>) {
    assert_eq!(got.len(), placed.len(), "{reader} on {topic}: record count");
    let by_place: BTreeMap<(i32, i64), FullRecord> = got
        .into_iter()
        .map(|r| ((r.partition, r.offset), r))
        .collect();
    for (i, &(p, o)) in placed.iter().enumerate() {
        let r = by_place
            .get(&(p, o))
            .unwrap_or_else(|| panic!("{reader} on {topic}: record {i} missing at {p}/{o}"));
        assert_eq!(
            *r,
            expected(topic, i, p, o),
            "{reader} on {topic}: record {i}"
        );
    }
}

fn kafka_libs() -> String {
    format!("{}/libs/*", Kafka::install_dir().display())
}

fn codec_tool() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("java-codec/KafkaCodec.java")
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s == "-" {
        return None;
    }
    Some(
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex from the Java consumer"))
            .collect(),
    )
}

/// Reads `topic` with Apache Kafka's own `KafkaConsumer`.
fn read_with_kafka_consumer(kafka: &Kafka, topic: &str) -> Vec<FullRecord> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(kafka_libs())
        .arg(codec_tool())
        .args([
            "consume",
            &kafka.bootstrap(),
            topic,
            &PARTITIONS.to_string(),
        ])
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Kafka's consumer failed on {topic}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        stdout
    );
    let mut records = Vec::new();
    let mut end = None;
    for line in stdout.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() == 2 && f[0] == "end" {
            end = f[1].parse::<usize>().ok();
            continue;
        }
        let Some(partition) = f.first().and_then(|p| p.parse::<i32>().ok()) else {
            continue; // a log line
        };
        assert!(f.len() >= 5, "unexpected line {line:?}");
        records.push(FullRecord {
            partition,
            offset: f[1].parse().expect("offset"),
            timestamp: Some(f[2].parse().expect("timestamp")),
            key: unhex(f[3]),
            value: unhex(f[4]),
            headers: f[5..]
                .iter()
                .map(|h| {
                    let (k, v) = h.split_once('=').expect("header k=v");
                    (k.to_owned(), unhex(v))
                })
                .collect(),
        });
    }
    assert_eq!(
        end,
        Some(records.len()),
        "Kafka's consumer finished: {stdout}"
    );
    records
}

/// The codecs of the batches in partition `p`'s first segment, per Kafka's DumpLogSegments.
fn codecs_in_log(kafka: &Kafka, topic: &str, p: i32) -> BTreeMap<String, usize> {
    let segment = kafka
        .dir()
        .join("node-1/data")
        .join(format!("{topic}-{p}"))
        .join("00000000000000000000.log");
    assert!(segment.is_file(), "{} is missing", segment.display());
    let out = Command::new("java")
        .arg("-cp")
        .arg(kafka_libs())
        .arg("org.apache.kafka.tools.DumpLogSegments")
        .arg("--files")
        .arg(&segment)
        .output()
        .expect("run DumpLogSegments");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "DumpLogSegments failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut codecs = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.split("compresscodec: ").nth(1) {
            let codec = rest.split_whitespace().next().unwrap_or("").to_lowercase();
            *codecs.entry(codec).or_insert(0) += 1;
        }
    }
    codecs
}

#[test]
fn every_codec_is_accepted_by_kafka_and_read_back_by_librdkafka_and_kafkas_consumer() {
    const N: usize = 3_000;
    let kafka = Kafka::start(1);
    for codec in CODECS {
        let started = Instant::now();
        let topic = format!("kprod-compression-{codec}");
        kafka.create_topic(&topic, PARTITIONS, 1, None);
        // Batches small enough that most close full and are compressed ahead, outside the
        // lock (kprod-tokio's driver), and the last of each partition goes at its linger,
        // compressed at its seal: both ways reach Kafka.
        let (placed, m) = produce(
            &kafka,
            &topic,
            N,
            &[("compression.type", codec), ("batch.size", "4096")],
        );
        let ahead = m.batches_compressed_ahead;
        let expected = if codec == "none" {
            ahead == 0
        } else {
            ahead > 0 && ahead < m.batches_sent
        };
        assert!(
            expected,
            "{topic}: {ahead} of {} batches compressed ahead",
            m.batches_sent
        );
        println!(
            "{topic}: {ahead} of {} batches compressed ahead",
            m.batches_sent
        );
        for p in 0..PARTITIONS {
            let codecs = codecs_in_log(&kafka, &topic, p);
            assert_eq!(
                codecs.keys().collect::<Vec<_>>(),
                vec![codec],
                "{topic}-{p}: the log holds the batches as compressed by kprod: {codecs:?}"
            );
            println!("{topic}-{p}: {codecs:?} batches");
        }
        let got = read_topic_full(&kafka.bootstrap(), &topic, PARTITIONS, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("librdkafka's reader on {topic}: {e}"));
        assert_read_back("librdkafka", &topic, &placed, got);
        assert_read_back(
            "Kafka's consumer",
            &topic,
            &placed,
            read_with_kafka_consumer(&kafka, &topic),
        );
        println!(
            "{codec}: {N} records accepted by Kafka, read back intact by librdkafka and \
             KafkaConsumer ({:.1?})",
            started.elapsed()
        );
    }
}

/// Creates `topic` with `max.message.bytes` set, through librdkafka's admin client.
fn create_small_topic(kafka: &Kafka, topic: &str, max_message_bytes: usize) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::config::ClientConfig;
    let bootstrap = kafka.bootstrap();
    let limit = max_message_bytes.to_string();
    let name = topic.to_owned();
    std::thread::spawn(move || {
        runtime().block_on(async {
            let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .create()
                .expect("admin client");
            let new = NewTopic::new(&name, PARTITIONS, TopicReplication::Fixed(1))
                .set("max.message.bytes", &limit);
            let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
            for r in admin
                .create_topics([&new], &opts)
                .await
                .expect("CreateTopics")
            {
                r.unwrap_or_else(|(t, e)| panic!("CreateTopics {t}: {e}"));
            }
        })
    })
    .join()
    .expect("admin thread");
    kafka.wait_topic(topic, PARTITIONS, 1);
}

#[test]
fn compressed_batches_refused_as_too_large_are_split_and_recompressed() {
    const N: usize = 400;
    const LIMIT: usize = 4096;
    let kafka = Kafka::start(1);
    for codec in ["gzip", "zstd"] {
        let topic = format!("kprod-compression-split-{codec}");
        create_small_topic(&kafka, &topic, LIMIT);
        // Values half of random bytes, half of one repeated byte: they compress to about
        // half (records a codec would grow go out uncompressed since 2026-12-07), so a 64 KiB
        // batch stays far above the 4 KiB limit compressed, and only splitting gets it in.
        let brokers = kafka.bootstrap();
        let config = config_from_properties(&[
            ("bootstrap.servers", brokers.as_str()),
            ("compression.type", codec),
            ("batch.size", "65536"),
            ("linger.ms", "50"),
        ])
        .expect("valid properties");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut values = Vec::new();
        let placed = runtime().block_on(async {
            let producer = ProducerHandle::connect(config).expect("valid config");
            let mut futures = Vec::new();
            for i in 0..N {
                let v: Vec<u8> = (0..300)
                    .map(|k| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if k < 150 {
                            seed as u8
                        } else {
                            b'a'
                        }
                    })
                    .collect();
                values.push(v.clone());
                let mut r = Record::new(topic.clone(), v);
                r.partition = Some((i % PARTITIONS as usize) as i32);
                r.timestamp = base_ts() + i as i64;
                futures.push(producer.enqueue(r).await.expect("accepted"));
            }
            let mut placed = Vec::new();
            for (i, f) in futures.into_iter().enumerate() {
                let d = tokio::time::timeout(Duration::from_secs(120), f)
                    .await
                    .unwrap_or_else(|_| panic!("{topic}: record {i} unresolved"))
                    .unwrap_or_else(|e| panic!("{topic}: record {i} failed: {e}"));
                placed.push((d.partition, d.offset.expect("an offset")));
            }
            close(producer).await;
            placed
        });
        let got = read_topic_full(&kafka.bootstrap(), &topic, PARTITIONS, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("librdkafka's reader on {topic}: {e}"));
        assert_eq!(got.len(), N, "{topic}: every record once");
        let by_place: BTreeMap<(i32, i64), &FullRecord> =
            got.iter().map(|r| ((r.partition, r.offset), r)).collect();
        for (i, p) in placed.iter().enumerate() {
            let r = by_place[p];
            assert_eq!(
                r.value.as_deref(),
                Some(&values[i][..]),
                "{topic}: record {i}"
            );
            assert_eq!(r.timestamp, Some(base_ts() + i as i64));
        }
        // Send order per partition: offsets rise with the index.
        for part in 0..PARTITIONS {
            let offs: Vec<i64> = placed
                .iter()
                .filter(|(p, _)| *p == part)
                .map(|(_, o)| *o)
                .collect();
            assert!(offs.windows(2).all(|w| w[1] == w[0] + 1), "{topic}-{part}");
        }
        let mut batches = 0;
        for p in 0..PARTITIONS {
            let codecs = codecs_in_log(&kafka, &topic, p);
            assert_eq!(codecs.keys().collect::<Vec<_>>(), vec![codec]);
            batches += codecs[codec];
        }
        // 400 records of 300 bytes would take 1-2 batches per partition unsplit; under a
        // 4 KiB limit each batch holds at most about 25 (their random halves alone).
        assert!(batches >= N / 26, "{topic}: {batches} batches in the log");
        println!("{topic}: {N} records in {batches} batches after splits");
    }
}
