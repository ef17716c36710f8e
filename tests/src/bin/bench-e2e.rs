//! End-to-end throughput and CPU benchmark: kprod-tokio against librdkafka (the `rdkafka`
//! crate) and the Java producer (Apache Kafka's kafka-clients), all idempotent, against one
//! local Tansu broker or an Apache Kafka cluster (1 or 3 nodes), in separate processes.
//!
//! ```text
//! cargo run --release -p kprod-tests --bin bench-e2e -- [--broker tansu|kafka]
//!     [--kafka-nodes 1|3] [--messages N] [--rounds R] [--warmup-rounds W]
//!     [--partitions P] [--size BYTES] [--linger-ms MS] [--batch-size BYTES]
//!     [--clients kprod,kprod-many,rdkafka,java,franz,rdkafka-future] [--only CLIENT] [--keyless]
//!     [--wire-stats] [--rdkafka-queue-kbytes KIB] [--same-topic]
//!     [--kprod-set KEY=VALUE]... [--keep-going] [--rolling-topics]
//!     [--fresh-broker | --shared-broker]
//!     [--kafka-jvm test|shipped]
//! ```
//!
//! Every round, each client sends the same N messages of `--size` bytes (a distinct 8-byte
//! counter followed by filler) to a fresh topic of its own (on Tansu, by default, on a Tansu
//! restarted empty just before the run: `--fresh-broker`), and waits for every
//! acknowledgement. The order of the clients alternates from round to round. Each run first
//! creates its producer and sends one warm-up record (connection, metadata and producer id
//! are therefore not timed), then measures:
//!
//! - wall time from the first send until the last acknowledgement, giving messages/s;
//! - the client's CPU time (user + system, every thread): for the Rust clients this
//!   process's, from `utime` and `stime` in `/proc/self/stat` (tokio's workers, librdkafka's
//!   threads and the sending thread); for the Java producer the JVM's, measured by the JVM
//!   itself over its own window (see below);
//! - for context, the broker's CPU time over the same interval (every node's process; not
//!   counted in the client's figure), and the CPU the rest of the machine used meanwhile
//!   (`/proc/stat` minus both: other processes, which make the run's figures less
//!   trustworthy).
//!
//! Before the measured rounds, `--warmup-rounds` rounds (default 1 when the Java producer
//! runs or the broker is Kafka, both JIT-compiled; 0 otherwise) run every client the same way
//! without counting: the JVMs' JIT warms up, and the first measured client does not pay for a
//! cold broker.
//!
//! Topics: on Tansu, P partitions; on Kafka, P partitions with replication factor
//! `--kafka-nodes` (1 or 3; `min.insync.replicas` the broker's default, 1; with acks=all the
//! leader still waits for the whole ISR).
//!
//! Clients:
//! - `kprod`: `ProducerHandle::enqueue` in a task on a 2-worker multi-thread tokio runtime;
//!   the `DeliveryFuture`s are kept in send order, the completed ones at the front are taken
//!   after every send, the rest awaited at the end. Idempotence, acks and max in-flight are
//!   kprod's defaults (true, all, 5); `linger.ms` and `batch.size` as given.
//! - `kprod-many`: the same, but the records go in chunks of 1,024 through
//!   `ProducerHandle::enqueue_many` (one hand-off to the driver task per chunk instead of one
//!   per record). Not run unless asked for.
//! - `kprod-nocap`: `kprod` with `kprod.max.batches.per.request=1000000`, i.e. without kprod's
//!   cap on the batches (partitions) in one Produce request (by default `max.request.size /
//!   batch.size`, 64): only `max.request.size` bounds a request, as in the Java producer. Not
//!   run unless asked for.
//!
//! `--kprod-set KEY=VALUE` (repeatable) adds a producer property (see
//! `kprod_tokio::config_from_properties`) to every kprod client (`kprod`, `kprod-many`,
//! `kprod-nocap`; for `kprod-nocap` its own setting comes last and wins), not to the others.
//! - `rdkafka`: a `ThreadedProducer` whose delivery callback counts the results in atomics;
//!   the crate's polling thread serves the callbacks, and the sending thread (the main
//!   thread; the tokio runtime exists but idles) only sends: on `QueueFull` it parks until
//!   1024 more acknowledgements arrived, and at the end parks until the last one. No
//!   per-message future or channel: the cheapest way the crate offers (see `run_rdkafka` for
//!   why not a `BaseProducer` polled by the sender).
//! - `rdkafka-future`: a `FutureProducer` driven like kprod (one future per message, in a
//!   task on the same runtime). Not run unless asked for.
//! - `kprod-callback`: `kprod`'s loop with `ProducerHandle::enqueue_with` and one counting
//!   callback that captures nothing (a `static` tally), the way the `rdkafka` and `java`
//!   clients count: no future per record. Not run unless asked for.
//! - `kprod-tasks` and `rdkafka-tasks`: `--tasks` tasks (default 1,000) share one producer,
//!   each sending its share of the messages one at a time, every send awaited before the
//!   next (`ProducerHandle::send`, `FutureProducer::send` without a timeout): many request
//!   handlers sharing a producer, a closed loop whose rate is tasks / latency. Not run
//!   unless asked for.
//! - `java`: kafka-clients (the broker's version, 4.4.0) in the `bench` command of the Java
//!   reference program (`tests/java`, built by `scripts/install-java-ref.sh`): one JVM
//!   (`-Xmx1g -XX:+UseSerialGC`), started before the warm-up rounds and kept for the whole
//!   bench, so neither its start-up nor its JIT's first compilations are timed. Per run it
//!   creates a new `KafkaProducer`, sends the warm-up record, prints `MEASURING`, sends from
//!   its main thread with one shared counting `Callback` (no per-record object of ours, like
//!   the rdkafka client) and prints wall time and CPU over its own window: from the first
//!   send to the last acknowledgement, `getProcessCpuTime` (on Linux in clock ticks, like
//!   `/proc`; every thread of the JVM: sender,
//!   the producer's I/O thread, JIT compiler, GC) before and after. The bench also reads the
//!   JVM's `/proc/<pid>/stat` ticks between the `MEASURING` and result lines, as a cross-check
//!   (it can only be a little larger: a few ms of bookkeeping around the window), and the
//!   JIT and GC milliseconds of the window are reported.
//! - `franz`: franz-go (github.com/twmb/franz-go, the version `tests/go/franz-bench/go.mod`
//!   pins), in `tests/go/franz-bench` (built by `scripts/install-franz-bench.sh`), which speaks
//!   the Java program's protocol: one process for the whole bench, a new client per run, the
//!   warm-up record, one shared counting promise, and its own wall time and CPU
//!   (`getrusage`, every thread) over the same window; its GC pause total is reported as the
//!   JVM's GC is. Not run unless asked for.
//!
//! librdkafka gets `enable.idempotence=true`, `acks=all`, `compression.type=none`,
//! `max.in.flight.requests.per.connection=5`, the same `linger.ms` and `batch.size`,
//! `batch.num.messages=1000000` (so that `batch.size` binds) and a 32 MiB queue (kprod's
//! default `buffer.memory`; `--rdkafka-queue-kbytes` changes it). The Java producer gets
//! idempotence, `acks=all`, `compression.type=none`, `max.in.flight.requests.per.connection=5`
//! and the same `linger.ms` and `batch.size`; its `buffer.memory` is its default, 32 MiB (on
//! Tansu also `metadata.cluster.check.enable=false`, see [`java_plan`]). franz-go gets its
//! idempotent defaults (acks all; its in-flight limit for idempotent producers, 5), the same
//! `linger.ms`, `batch.size` as `ProducerBatchMaxBytes`, no compression (its default prefers
//! snappy) and `MaxBufferedBytes` 32 MiB (the record-count bound raised out of the way). By
//! default message i goes to partition i mod P on every client; with `--keyless` each
//! client's own partitioner for keyless records picks.
//!
//! With `--wire-stats` the broker advertises the port of a counting proxy inside this process,
//! so that every connection goes through it, and the report adds, per run, the Produce
//! requests, record batches, records per batch and bytes per batch the client sent. The
//! proxy's threads then count as the client's CPU, and the extra hop slows both clients:
//! that mode shows whether the clients batch alike, not what they cost. On Kafka, each node
//! gets a proxy (and a `CLIENT` listener advertising it).
//!
//! Exit status: 0 when every message of every run was acknowledged, 1 when a run failed
//! (a delivery error, a timeout), 2 for a usage or setup error.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::pin::Pin;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kprod_core::protocol::{DecodeError, Reader};
use kprod_core::{Record, TopicName};
use kprod_tests::franz;
use kprod_tests::javaref::{self, BenchPlan, JavaBench};
use kprod_tests::kafka::KAFKA_VERSION;
use kprod_tests::override_properties;
use kprod_tests::{Kafka, KafkaOptions, Tansu, TANSU_VERSION};
use kprod_tokio::{config_from_properties, ProducerHandle};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{
    BaseRecord, FutureProducer, FutureRecord, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;

const USAGE: &str = "\
usage: bench-e2e [--broker tansu|kafka] [--kafka-nodes N] [--messages N] [--rounds R]
                 [--warmup-rounds W] [--partitions P] [--size BYTES] [--linger-ms MS]
                 [--batch-size BYTES] [--clients LIST] [--only CLIENT] [--keyless]
                 [--wire-stats] [--rdkafka-queue-kbytes KIB] [--same-topic]
                 [--kprod-set KEY=VALUE]... [--keep-going] [--rolling-topics]
                 [--fresh-broker | --shared-broker] [--kafka-jvm test|shipped]

  --broker      tansu (Tansu, in-memory; by default restarted empty for every run) or kafka
                (Apache Kafka 4.4.0, KRaft)
                (default tansu)
  --kafka-nodes Kafka nodes, 1 or 3; topics get this replication factor (default 1)
  --messages    messages per run (default 200000)
  --rounds      rounds; every round runs each client once (default 5)
  --warmup-rounds
                unmeasured rounds first (default 3 with --kafka-jvm shipped, else 1 with
                java or kafka, else 0)
  --partitions  partitions of each topic (default 4)
  --size        message value size in bytes, at least 8 (default 100)
  --linger-ms   linger.ms for every client (default 5)
  --batch-size  batch.size for every client (default 16384)
  --clients     comma-separated: kprod, kprod-many, kprod-nocap, rdkafka, java, franz,
                rdkafka-future, kprod-callback, kprod-tasks, rdkafka-tasks (default
                kprod,rdkafka); kprod-callback is kprod with enqueue_with; franz is
                franz-go (Go); kprod-nocap is kprod with kprod.max.batches.per.request=1000000
                (no cap on batches per request); the -tasks clients send from --tasks tasks,
                each awaiting every send
  --tasks       sending tasks of kprod-tasks and rdkafka-tasks (default 1000)
  --only        one client only (for profiling), same as --clients CLIENT
  --keyless     let each client's partitioner choose (default: message i to partition i mod P)
  --rdkafka-queue-kbytes
                librdkafka's queue.buffering.max.kbytes (default 32768, kprod's
                default buffer.memory of 32 MiB)
  --wire-stats  route the clients through an in-process counting proxy and report Produce
                requests, batches and records per batch; its threads' CPU then counts as
                the client's, so use this mode to compare batching, not CPU
  --same-topic  each client writes every round to one topic of its own (warmed by the
                warm-up rounds) instead of a fresh one per round: on Kafka the first
                appends to a new partition's log are costly, which at hundreds of
                partitions is most of a round
  --kprod-set   KEY=VALUE: a producer property for the kprod clients only (kprod,
                kprod-many, kprod-nocap), e.g. kprod.max.batches.per.request=1000000;
                repeatable, applied after the bench's own (bootstrap, client.id, linger.ms,
                batch.size)
  --keep-going  a failed run is reported and left out instead of ending the bench (the
                exit status is still 1)
  --rolling-topics
                (Kafka, without --same-topic) create each round's fresh topics just before
                the round and delete them after it, instead of every round's up front: the
                broker then holds one round's partitions at a time (clients x P), not
                (rounds + warm-up rounds) x clients x P, which at thousands of partitions
                exhausts its open files. After the deletion the bench waits (up to 150 s)
                until the broker has removed the deleted logs (file.delete.delay.ms, 60 s
                by default), which keep their files open until then
  --fresh-broker
                (Tansu; the default there without --same-topic) restart Tansu before every
                client's run, warm-up runs included, so that each run starts on empty
                in-memory storage and creates its topic there: Tansu slows as its memory
                storage fills (its CPU per record grows round after round), which would
                charge whichever client runs later
  --shared-broker
                (Tansu) one Tansu for the whole bench, every round's topics created up
                front (the bench before --fresh-broker)
  --kafka-jvm   (Kafka) the nodes' JVM settings: test (default; the suite's: 512 MiB heap,
                serial GC, C1 only) or shipped (what kafka-server-start.sh gives a broker:
                1 GiB heap, G1, C1 and C2)";

/// The `kprod-nocap` client's setting: no cap on batches per Produce request.
const KPROD_NOCAP: (&str, &str) = ("kprod.max.batches.per.request", "1000000");

/// Records per `enqueue_many` call of the `kprod-many` client.
const KPROD_MANY_CHUNK: usize = 1024;

/// The longest a single run may take before it counts as failed.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Kprod,
    /// kprod with `ProducerHandle::enqueue_many`, [`KPROD_MANY_CHUNK`] records per call.
    KprodMany,
    /// kprod with [`KPROD_NOCAP`].
    KprodNocap,
    Rdkafka,
    RdkafkaFuture,
    /// kprod with `ProducerHandle::enqueue_with` and one shared counting callback
    /// ([`run_kprod_callback`]).
    KprodCallback,
    /// kprod, `--tasks` tasks each awaiting every `send` ([`run_kprod_tasks`]).
    KprodTasks,
    /// librdkafka's `FutureProducer` driven like `kprod-tasks` ([`run_rdkafka_tasks`]).
    RdkafkaTasks,
    Java,
    /// franz-go, in `tests/go/franz-bench`.
    Franz,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Self::Kprod => "kprod",
            Self::KprodMany => "kprod-many",
            Self::KprodNocap => "kprod-nocap",
            Self::Rdkafka => "rdkafka",
            Self::RdkafkaFuture => "rdkafka-future",
            Self::KprodCallback => "kprod-callback",
            Self::KprodTasks => "kprod-tasks",
            Self::RdkafkaTasks => "rdkafka-tasks",
            Self::Java => "java",
            Self::Franz => "franz",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "kprod" => Some(Self::Kprod),
            "kprod-many" => Some(Self::KprodMany),
            "kprod-nocap" => Some(Self::KprodNocap),
            "rdkafka" => Some(Self::Rdkafka),
            "rdkafka-future" => Some(Self::RdkafkaFuture),
            "kprod-callback" => Some(Self::KprodCallback),
            "kprod-tasks" => Some(Self::KprodTasks),
            "rdkafka-tasks" => Some(Self::RdkafkaTasks),
            "java" => Some(Self::Java),
            "franz" => Some(Self::Franz),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BrokerKind {
    Tansu,
    Kafka,
}

#[derive(Debug, Clone)]
struct Args {
    broker: BrokerKind,
    kafka_nodes: usize,
    messages: u64,
    rounds: u32,
    warmup_rounds: u32,
    partitions: u32,
    size: usize,
    linger_ms: u64,
    batch_size: u32,
    clients: Vec<Client>,
    keyless: bool,
    wire_stats: bool,
    rdkafka_queue_kbytes: u32,
    same_topic: bool,
    /// `--kprod-set`: extra producer properties for the kprod clients.
    kprod_set: Vec<(String, String)>,
    keep_going: bool,
    rolling_topics: bool,
    /// `--fresh-broker`: a restarted (empty) Tansu for every run.
    fresh_broker: bool,
    /// `--kafka-jvm shipped`: Kafka's nodes run with the JVM settings Kafka ships.
    shipped_jvm: bool,
    /// `--tasks`: concurrent sending tasks of `kprod-tasks` and `rdkafka-tasks`.
    tasks: u64,
}

impl Args {
    /// The Kafka cluster to start: `--kafka-nodes` nodes, with `--kafka-jvm`'s settings.
    fn kafka_options(&self) -> KafkaOptions {
        let opts = KafkaOptions::new(self.kafka_nodes);
        if self.shipped_jvm {
            opts.shipped_jvm()
        } else {
            opts
        }
    }

    fn parse() -> Result<Self, String> {
        let mut a = Self {
            broker: BrokerKind::Tansu,
            kafka_nodes: 1,
            messages: 200_000,
            rounds: 5,
            warmup_rounds: 0,
            partitions: 4,
            size: 100,
            linger_ms: 5,
            batch_size: 16_384,
            clients: vec![Client::Kprod, Client::Rdkafka],
            keyless: false,
            wire_stats: false,
            // kprod's default `buffer.memory` (32 MiB).
            rdkafka_queue_kbytes: 32 * 1024,
            tasks: 1000,
            same_topic: false,
            kprod_set: Vec::new(),
            keep_going: false,
            rolling_topics: false,
            fresh_broker: false,
            shipped_jvm: false,
        };
        let mut warmup_rounds = None;
        let mut fresh_broker = None;
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                return Err(String::new());
            }
            if flag == "--keyless" {
                a.keyless = true;
                continue;
            }
            if flag == "--wire-stats" {
                a.wire_stats = true;
                continue;
            }
            if flag == "--same-topic" {
                a.same_topic = true;
                continue;
            }
            if flag == "--keep-going" {
                a.keep_going = true;
                continue;
            }
            if flag == "--rolling-topics" {
                a.rolling_topics = true;
                continue;
            }
            if flag == "--fresh-broker" {
                fresh_broker = Some(true);
                continue;
            }
            if flag == "--shared-broker" {
                fresh_broker = Some(false);
                continue;
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |what: &str| format!("invalid value {value:?} for {flag}: expected {what}");
            match flag.as_str() {
                "--broker" => {
                    a.broker = match value.as_str() {
                        "tansu" => BrokerKind::Tansu,
                        "kafka" => BrokerKind::Kafka,
                        _ => return Err(bad("tansu or kafka")),
                    };
                }
                "--kafka-nodes" => {
                    a.kafka_nodes = match value.as_str() {
                        "1" => 1,
                        "3" => 3,
                        _ => return Err(bad("1 or 3")),
                    };
                }
                "--warmup-rounds" => {
                    warmup_rounds = Some(value.parse().map_err(|_| bad("an integer"))?);
                }
                "--messages" => {
                    a.messages = value.parse().map_err(|_| bad("a positive integer"))?;
                }
                "--rounds" => a.rounds = value.parse().map_err(|_| bad("a positive integer"))?,
                "--partitions" => {
                    a.partitions = value.parse().map_err(|_| bad("a positive integer"))?;
                }
                "--size" => a.size = value.parse().map_err(|_| bad("an integer >= 8"))?,
                "--kafka-jvm" => {
                    a.shipped_jvm = match value.as_str() {
                        "test" => false,
                        "shipped" => true,
                        _ => return Err(bad("test or shipped")),
                    }
                }
                "--linger-ms" => a.linger_ms = value.parse().map_err(|_| bad("milliseconds"))?,
                "--batch-size" => a.batch_size = value.parse().map_err(|_| bad("bytes"))?,
                "--kprod-set" => {
                    let (k, v) = value
                        .split_once('=')
                        .filter(|(k, _)| !k.trim().is_empty())
                        .ok_or_else(|| bad("KEY=VALUE"))?;
                    a.kprod_set.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                "--tasks" => {
                    a.tasks = value.parse().map_err(|_| bad("count"))?;
                    if a.tasks == 0 {
                        return Err("--tasks must be at least 1".into());
                    }
                }
                "--rdkafka-queue-kbytes" => {
                    a.rdkafka_queue_kbytes = value.parse().map_err(|_| bad("KiB"))?;
                }
                "--clients" | "--only" => {
                    let list = value
                        .split(',')
                        .map(|s| {
                            Client::parse(s)
                                .ok_or_else(|| {
                                    bad("kprod, kprod-many, kprod-nocap, rdkafka, java, franz or rdkafka-future")
                                })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    if flag == "--only" && list.len() != 1 {
                        return Err(bad("one client"));
                    }
                    a.clients = list;
                }
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        if a.messages == 0 || a.rounds == 0 || a.partitions == 0 || a.clients.is_empty() {
            return Err(
                "--messages, --rounds, --partitions and --clients must not be zero or empty".into(),
            );
        }
        if a.size < 8 {
            return Err("--size must be at least 8".into());
        }
        for (i, c) in a.clients.iter().enumerate() {
            if a.clients[..i].contains(c) {
                return Err(format!("client {} given twice", c.name()));
            }
        }
        if a.rolling_topics && (a.broker != BrokerKind::Kafka || a.same_topic) {
            return Err("--rolling-topics needs --broker kafka and no --same-topic".into());
        }
        a.fresh_broker = match fresh_broker {
            Some(true) if a.broker != BrokerKind::Tansu || a.same_topic => {
                return Err("--fresh-broker needs --broker tansu and no --same-topic".into());
            }
            Some(false) if a.broker != BrokerKind::Tansu => {
                return Err("--shared-broker needs --broker tansu".into());
            }
            Some(fresh) => fresh,
            None => a.broker == BrokerKind::Tansu && !a.same_topic,
        };
        if a.shipped_jvm && a.broker != BrokerKind::Kafka {
            return Err("--kafka-jvm needs --broker kafka".into());
        }
        if a.kafka_nodes != 1 && a.broker != BrokerKind::Kafka {
            return Err("--kafka-nodes needs --broker kafka".into());
        }
        // The JVMs (the Java producer, Kafka) need their JIT warmed up; a shipped Kafka's C2
        // compiler longer (its brokers still compiled through a second warm-up round).
        let jit = a.broker == BrokerKind::Kafka || a.clients.contains(&Client::Java);
        let rounds = if a.shipped_jvm { 3 } else { 1 };
        a.warmup_rounds = warmup_rounds.unwrap_or(if jit { rounds } else { 0 });
        Ok(a)
    }

    fn partition(&self, i: u64) -> Option<i32> {
        (!self.keyless).then(|| (i % u64::from(self.partitions)) as i32)
    }
}

/// Fills `buf` with message `i`: its number, then filler.
fn fill(buf: &mut [u8], i: u64) {
    buf[..8].copy_from_slice(&i.to_be_bytes());
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|j| b'a' + (j % 26) as u8).collect()
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc
// ---------------------------------------------------------------------------------------------

/// `utime + stime` of a process, in clock ticks, from `/proc/<pid>/stat` (fields 14 and 15).
/// For a process (thread group) this covers every thread, live or exited.
fn cpu_ticks(stat_path: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(stat_path).map_err(|e| format!("{stat_path}: {e}"))?;
    let fields = stat_fields(&text).ok_or_else(|| format!("{stat_path}: unexpected format"))?;
    // fields[0] is field 3 (state): field k is fields[k - 3].
    let num = |k: usize| -> Result<u64, String> {
        fields
            .get(k - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{stat_path}: field {k} missing"))
    };
    Ok(num(14)? + num(15)?)
}

/// The fields after the `(comm)` of a stat line (the name may hold spaces and parentheses).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let close = text.rfind(')')?;
    Some(text[close + 1..].split_whitespace().collect())
}

/// Clock ticks per second, from `getconf CLK_TCK` (100 if that fails, with a warning).
fn clock_ticks_per_second() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output();
    match out
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&t| t > 0)
    {
        Some(t) => t,
        None => {
            eprintln!("warning: `getconf CLK_TCK` failed; assuming 100 ticks per second");
            100
        }
    }
}

/// Busy clock ticks of the whole machine (every CPU): the `cpu` line of `/proc/stat`, all
/// but idle and iowait (guest time is already in user).
fn machine_busy_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    Some(v.iter().take(8).sum::<u64>() - v.get(3)? - v.get(4)?)
}

/// Tansu's pid: our child process named `tansu`.
fn find_broker_pid() -> Option<u32> {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let comm = text
            .find('(')
            .zip(text.rfind(')'))
            .map(|(a, b)| &text[a + 1..b]);
        let ppid = stat_fields(&text).and_then(|f| f.get(1).copied());
        if comm == Some("tansu") && ppid == Some(me.as_str()) {
            return Some(pid);
        }
    }
    None
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    cpu: u64,
    broker_cpu: Option<u64>,
    machine_busy: Option<u64>,
    wire: Option<WireStats>,
}

#[derive(Debug, Clone)]
struct Meter {
    ticks_per_second: u64,
    /// The client's `/proc/<pid>/stat`: this process's, or the Java producer's JVM's.
    client_stat: String,
    /// Every broker process's stat file (none: the broker's CPU is not reported).
    broker_stats: Vec<String>,
    wire: Option<Arc<WireCounters>>,
}

impl Meter {
    /// The start of a timed window: the clock is read last, so reading /proc is outside it.
    fn start(&self) -> Sample {
        let (cpu, broker_cpu, machine_busy, wire) = self.counters();
        Sample {
            at: Instant::now(),
            cpu,
            broker_cpu,
            machine_busy,
            wire,
        }
    }

    /// The end of a timed window: the clock is read first.
    fn end(&self) -> Sample {
        let at = Instant::now();
        let (cpu, broker_cpu, machine_busy, wire) = self.counters();
        Sample {
            at,
            cpu,
            broker_cpu,
            machine_busy,
            wire,
        }
    }

    fn counters(&self) -> (u64, Option<u64>, Option<u64>, Option<WireStats>) {
        let cpu = cpu_ticks(&self.client_stat).unwrap_or_else(|e| panic!("{e}"));
        let broker_cpu = (!self.broker_stats.is_empty())
            .then(|| {
                self.broker_stats
                    .iter()
                    .map(|p| cpu_ticks(p).ok())
                    .sum::<Option<u64>>()
            })
            .flatten();
        (
            cpu,
            broker_cpu,
            machine_busy_ticks(),
            self.wire.as_deref().map(WireCounters::snapshot),
        )
    }

    fn ticks(&self, t: u64) -> Duration {
        Duration::from_secs_f64(t as f64 / self.ticks_per_second as f64)
    }

    fn measure(&self, start: Sample, end: Sample) -> Measured {
        let cpu = end.cpu - start.cpu;
        let broker_cpu = start.broker_cpu.zip(end.broker_cpu).map(|(a, b)| b - a);
        Measured {
            wall: end.at - start.at,
            cpu: self.ticks(cpu),
            broker_cpu: broker_cpu.map(|b| self.ticks(b)),
            other_cpu: start
                .machine_busy
                .zip(end.machine_busy)
                .map(|(a, b)| self.ticks((b - a).saturating_sub(cpu + broker_cpu.unwrap_or(0)))),
            wire: start.wire.zip(end.wire).map(|(a, b)| b.minus(a)),
            java: None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    wall: Duration,
    cpu: Duration,
    broker_cpu: Option<Duration>,
    /// CPU time the rest of the machine used meanwhile (other processes, interrupts).
    other_cpu: Option<Duration>,
    wire: Option<WireStats>,
    /// The Java producer's extra figures.
    java: Option<JavaExtra>,
}

/// What else the JVM's run tells.
#[derive(Debug, Clone, Copy)]
struct JavaExtra {
    /// The JVM's CPU from its `/proc/<pid>/stat` between the bench reading `MEASURING` and the
    /// result line (the cross-check of its own `getProcessCpuTime` figure).
    proc_cpu: Duration,
    /// JIT compilation and GC time in the window, ms.
    jit_ms: i64,
    gc_ms: i64,
    gc_count: u64,
}

// ---------------------------------------------------------------------------------------------
// Wire statistics (--wire-stats): a counting TCP proxy between the clients and the broker
// ---------------------------------------------------------------------------------------------

/// What the clients sent through the proxy, summed over connections.
#[derive(Debug, Default)]
struct WireCounters {
    bytes: AtomicU64,
    requests: AtomicU64,
    produce_requests: AtomicU64,
    batches: AtomicU64,
    records: AtomicU64,
    batch_bytes: AtomicU64,
    unparsed: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default)]
struct WireStats {
    bytes: u64,
    requests: u64,
    produce_requests: u64,
    batches: u64,
    records: u64,
    batch_bytes: u64,
    unparsed: u64,
}

impl WireCounters {
    fn snapshot(&self) -> WireStats {
        let l = |a: &AtomicU64| a.load(Ordering::SeqCst);
        WireStats {
            bytes: l(&self.bytes),
            requests: l(&self.requests),
            produce_requests: l(&self.produce_requests),
            batches: l(&self.batches),
            records: l(&self.records),
            batch_bytes: l(&self.batch_bytes),
            unparsed: l(&self.unparsed),
        }
    }

    /// Counts one request frame (without its size prefix).
    fn count(&self, frame: &[u8]) {
        self.bytes
            .fetch_add(frame.len() as u64 + 4, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        if frame.len() < 2 || i16::from_be_bytes([frame[0], frame[1]]) != 0 {
            return;
        }
        self.produce_requests.fetch_add(1, Ordering::Relaxed);
        match produce_batches(frame) {
            Ok(batches) => {
                for (size, records) in batches {
                    self.batches.fetch_add(1, Ordering::Relaxed);
                    self.batch_bytes.fetch_add(size, Ordering::Relaxed);
                    self.records.fetch_add(records, Ordering::Relaxed);
                }
            }
            Err(_) => {
                self.unparsed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl WireStats {
    fn minus(self, o: Self) -> Self {
        Self {
            bytes: self.bytes - o.bytes,
            requests: self.requests - o.requests,
            produce_requests: self.produce_requests - o.produce_requests,
            batches: self.batches - o.batches,
            records: self.records - o.records,
            batch_bytes: self.batch_bytes - o.batch_bytes,
            unparsed: self.unparsed - o.unparsed,
        }
    }
}

/// The record batches of a Produce request frame (v3 and later, flexible or not; v13 names
/// topics by id): each batch's size in bytes and its record count.
fn produce_batches(frame: &[u8]) -> Result<Vec<(u64, u64)>, DecodeError> {
    let mut r = Reader::new(Bytes::copy_from_slice(frame));
    let _api_key = r.i16()?;
    let version = r.i16()?;
    let _correlation_id = r.i32()?;
    let _client_id = r.nullable_string(false)?;
    let flexible = version >= 9;
    if flexible {
        r.skip_tagged_fields()?;
    }
    if version >= 3 {
        let _transactional_id = r.nullable_string(flexible)?;
    }
    let _acks = r.i16()?;
    let _timeout = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..r.array_len(flexible)? {
        if version >= 13 {
            let _topic_id = r.uuid()?;
        } else {
            let _topic = r.string(flexible)?;
        }
        for _ in 0..r.array_len(flexible)? {
            let _partition = r.i32()?;
            if let Some(records) = r.nullable_bytes(flexible)? {
                let mut rest = &records[..];
                // A v2 batch: base offset (8), length (4), ..., record count at 57..61.
                while rest.len() >= 61 {
                    let len = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
                    let size = 12 + usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
                    let count = i32::from_be_bytes([rest[57], rest[58], rest[59], rest[60]]);
                    out.push((size as u64, u64::try_from(count).unwrap_or(0)));
                    rest = rest.get(size..).ok_or(DecodeError::Truncated)?;
                }
            }
            if flexible {
                r.skip_tagged_fields()?;
            }
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
    }
    Ok(out)
}

/// Forwards every connection accepted on `listener` to `upstream`, counting the requests.
/// Plain threads, two per connection; they end with their connections.
fn start_wire_proxy(listener: TcpListener, upstream: SocketAddr, counters: Arc<WireCounters>) {
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let counters = counters.clone();
            std::thread::spawn(move || {
                if let Err(e) = proxy_connection(client, upstream, &counters) {
                    eprintln!("wire proxy: {e}");
                }
            });
        }
    });
}

fn proxy_connection(
    client: TcpStream,
    upstream: SocketAddr,
    counters: &WireCounters,
) -> std::io::Result<()> {
    let broker = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    broker.set_nodelay(true)?;
    let (mut down_from, mut down_to) = (broker.try_clone()?, client.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut down_from, &mut down_to);
        let _ = down_to.shutdown(Shutdown::Both);
        let _ = down_from.shutdown(Shutdown::Both);
    });
    let (mut from, mut to) = (client, broker);
    let mut frame = Vec::new();
    loop {
        let mut size = [0u8; 4];
        if from.read_exact(&mut size).is_err() {
            break;
        }
        let n = usize::try_from(i32::from_be_bytes(size)).unwrap_or(0);
        frame.resize(n, 0);
        from.read_exact(&mut frame)?;
        counters.count(&frame);
        to.write_all(&size)?;
        to.write_all(&frame)?;
    }
    let _ = to.shutdown(Shutdown::Both);
    Ok(())
}

/// Acknowledgement counts of a run.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    failed: u64,
    first_error: Option<String>,
}

impl Tally {
    fn record<E: std::fmt::Display>(&mut self, r: Result<(), E>) {
        match r {
            Ok(()) => self.ok += 1,
            Err(e) => {
                self.failed += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(e.to_string());
                }
            }
        }
    }

    fn merge(&mut self, other: Self) {
        self.ok += other.ok;
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn check(&self, n: u64) -> Result<(), String> {
        if self.ok == n && self.failed == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} of {n} acknowledged, {} failed; first error: {}",
                self.ok,
                self.failed,
                self.first_error.as_deref().unwrap_or("none")
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Futures kept in send order
// ---------------------------------------------------------------------------------------------

struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Delivery futures in send order. After every send the completed ones at the front are
/// taken without waiting (polled with a no-op waker; a later `.await` registers the real
/// one), so memory follows the records in flight, not N.
struct InOrder<F> {
    queue: VecDeque<F>,
    waker: Waker,
}

impl<F: Future + Unpin> InOrder<F> {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            waker: Waker::from(Arc::new(NoopWake)),
        }
    }

    fn push(&mut self, f: F) {
        self.queue.push_back(f);
    }

    /// Takes the completed futures at the front.
    fn take_ready(&mut self, mut on: impl FnMut(F::Output)) {
        let mut cx = Context::from_waker(&self.waker);
        while let Some(front) = self.queue.front_mut() {
            match Pin::new(front).poll(&mut cx) {
                Poll::Ready(out) => {
                    self.queue.pop_front();
                    on(out);
                }
                Poll::Pending => break,
            }
        }
    }

    /// Waits for the oldest future; `None` when there is none.
    async fn next(&mut self) -> Option<F::Output> {
        let f = self.queue.pop_front()?;
        Some(f.await)
    }
}

// ---------------------------------------------------------------------------------------------
// kprod-tokio
// ---------------------------------------------------------------------------------------------

/// A kprod producer with the bench's settings and `extra`, its warm-up record (connection,
/// metadata, producer id) acknowledged.
async fn kprod_producer(
    args: &Args,
    bootstrap: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> Result<ProducerHandle, String> {
    let linger = args.linger_ms.to_string();
    let batch = args.batch_size.to_string();
    let props = vec![
        ("bootstrap.servers", bootstrap),
        ("client.id", "bench-kprod"),
        ("linger.ms", linger.as_str()),
        ("batch.size", batch.as_str()),
    ];
    let set = args.kprod_set.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let props = override_properties(props, set.chain(extra.iter().copied()));
    let config = config_from_properties(&props).map_err(|e| format!("kprod config: {e}"))?;
    let producer = ProducerHandle::connect(config).map_err(|e| format!("kprod: {e}"))?;
    let mut warm = Record::new(topic, Bytes::from(payload(args.size)));
    warm.partition = Some(0);
    producer
        .send(warm)
        .await
        .map_err(|e| format!("kprod warm-up record: {e}"))?;
    Ok(producer)
}

async fn run_kprod(
    args: Arc<Args>,
    bootstrap: String,
    topic: String,
    meter: Meter,
    chunk: usize,
    extra: &[(&str, &str)],
) -> Result<Measured, String> {
    let producer = kprod_producer(&args, &bootstrap, &topic, extra).await?;
    let mut buf = payload(args.size);
    // The topic's name once, cloned into each record (a shared `Arc<str>`, no allocation).
    let topic = TopicName::from(topic);
    let start = meter.start();
    let mut tally = Tally::default();
    let mut pending = InOrder::new();
    let mut i = 0;
    'send: while i < args.messages {
        if chunk <= 1 {
            fill(&mut buf, i);
            let mut record = Record::new(topic.clone(), Bytes::copy_from_slice(&buf));
            record.partition = args.partition(i);
            i += 1;
            match producer.enqueue(record).await {
                Ok(f) => pending.push(f),
                Err(e) => {
                    tally.record(Err(e));
                    break;
                }
            }
        } else {
            let end = (i + chunk as u64).min(args.messages);
            let records: Vec<Record> = (i..end)
                .map(|k| {
                    fill(&mut buf, k);
                    let mut record = Record::new(topic.clone(), Bytes::copy_from_slice(&buf));
                    record.partition = args.partition(k);
                    record
                })
                .collect();
            i = end;
            for r in producer.enqueue_many(records).await {
                match r {
                    Ok(f) => pending.push(f),
                    Err(e) => {
                        tally.record(Err(e));
                        break 'send;
                    }
                }
            }
        }
        pending.take_ready(|r| tally.record(r.map(drop)));
    }
    while let Some(r) = pending.next().await {
        tally.record(r.map(drop));
    }
    let end = meter.end();
    print_request_shape(&producer).await;
    producer.close().await;
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

/// The run's Produce requests and batches, from the producer's metrics.
async fn print_request_shape(producer: &ProducerHandle) {
    let m = producer.metrics().await;
    println!(
        "      {} Produce requests, {} batches ({:.2} a request, {:.1} records a batch)",
        m.produce_requests,
        m.batches_sent,
        m.batches_sent as f64 / m.produce_requests.max(1) as f64,
        m.records_delivered as f64 / m.batches_sent.max(1) as f64,
    );
}

/// The outcomes [`run_kprod_callback`]'s callbacks count.
struct Counted {
    tally: Mutex<Tally>,
    /// Outcomes so far.
    seen: AtomicU64,
    /// Records accepted, once all are (`u64::MAX` until then): the callback that sees the
    /// last outcome wakes the sender.
    target: AtomicU64,
    all: tokio::sync::Notify,
}

/// [`run_kprod_callback`]'s tally: a static, so that the callback captures nothing (boxing
/// it allocates nothing), as the rdkafka and Java clients share one counting callback. One
/// `kprod-callback` run at a time (the bench runs one client at a time).
static COUNTED: Counted = Counted {
    tally: Mutex::new(Tally {
        ok: 0,
        failed: 0,
        first_error: None,
    }),
    seen: AtomicU64::new(0),
    target: AtomicU64::new(u64::MAX),
    all: tokio::sync::Notify::const_new(),
};

/// `kprod-callback`: [`run_kprod`]'s loop with `ProducerHandle::enqueue_with` and a
/// callback per record that counts its outcome in one shared tally ([`COUNTED`]: the
/// rdkafka and Java clients' way, no future per record); the end waits for the last
/// outcome.
async fn run_kprod_callback(
    args: Arc<Args>,
    bootstrap: String,
    topic: String,
    meter: Meter,
) -> Result<Measured, String> {
    let producer = kprod_producer(&args, &bootstrap, &topic, &[]).await?;
    let mut buf = payload(args.size);
    let topic = TopicName::from(topic);
    let counted = &COUNTED;
    *counted.tally.lock().unwrap_or_else(|e| e.into_inner()) = Tally::default();
    counted.seen.store(0, Ordering::SeqCst);
    counted.target.store(u64::MAX, Ordering::SeqCst);
    let start = meter.start();
    let mut refused = Tally::default();
    let mut sent = 0;
    for i in 0..args.messages {
        fill(&mut buf, i);
        let mut record = Record::new(topic.clone(), Bytes::copy_from_slice(&buf));
        record.partition = args.partition(i);
        let accepted = producer
            .enqueue_with(record, |r| {
                let c = &COUNTED;
                let r = r.map(drop).map_err(|e| e.to_string());
                if r.is_err() {
                    c.tally.lock().unwrap_or_else(|e| e.into_inner()).record(r);
                }
                // SeqCst here and below: a store then a load on each side, so that one of
                // the two sees the other's store.
                let seen = c.seen.fetch_add(1, Ordering::SeqCst) + 1;
                if seen >= c.target.load(Ordering::SeqCst) {
                    c.all.notify_one();
                }
            })
            .await;
        if let Err(e) = accepted {
            refused.record(Err(e));
            break;
        }
        sent += 1;
    }
    counted.target.store(sent, Ordering::SeqCst);
    while counted.seen.load(Ordering::SeqCst) < sent {
        counted.all.notified().await;
    }
    let end = meter.end();
    print_request_shape(&producer).await;
    producer.close().await;
    let mut tally = std::mem::take(&mut *counted.tally.lock().unwrap_or_else(|e| e.into_inner()));
    tally.ok = sent - tally.failed;
    tally.merge(refused);
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

/// Task `k` of `tasks` sends messages `k`, `k + tasks`, ... one at a time, each awaited
/// by `send` before the next: the shape of many request handlers sharing one producer.
async fn send_share<F, Fut, E>(args: Arc<Args>, k: u64, send: F) -> Tally
where
    F: Fn(u64, &[u8]) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut buf = payload(args.size);
    let mut tally = Tally::default();
    let mut i = k;
    while i < args.messages {
        fill(&mut buf, i);
        tally.record(send(i, &buf).await);
        i += args.tasks;
    }
    tally
}

/// Spawns `--tasks` tasks, each sending its share ([`send_share`]) with its own `send`
/// from `make`, and adds up their tallies once all are done.
async fn send_from_tasks<M, F, Fut, E>(args: &Arc<Args>, make: M) -> Result<Tally, String>
where
    M: Fn() -> F,
    F: Fn(u64, &[u8]) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + 'static,
{
    let tasks: Vec<_> = (0..args.tasks.min(args.messages))
        .map(|k| tokio::spawn(send_share(args.clone(), k, make())))
        .collect();
    let mut tally = Tally::default();
    for t in tasks {
        tally.merge(t.await.map_err(|e| format!("sending task: {e}"))?);
    }
    Ok(tally)
}

/// `kprod-tasks`: `--tasks` tasks on the runtime, each sending its share of the messages
/// with `ProducerHandle::send(...).await` ([`send_share`]): no window of futures of the
/// application's own, so every record's hand-off and wake-up is on the path.
async fn run_kprod_tasks(
    args: Arc<Args>,
    bootstrap: String,
    topic: String,
    meter: Meter,
) -> Result<Measured, String> {
    let producer = kprod_producer(&args, &bootstrap, &topic, &[]).await?;
    let topic = TopicName::from(topic);
    let start = meter.start();
    let tally = send_from_tasks(&args, || {
        let (producer, topic, args) = (producer.clone(), topic.clone(), args.clone());
        move |i, buf: &[u8]| {
            let mut record = Record::new(topic.clone(), Bytes::copy_from_slice(buf));
            record.partition = args.partition(i);
            let producer = producer.clone();
            async move { producer.send(record).await.map(drop) }
        }
    })
    .await?;
    let end = meter.end();
    print_request_shape(&producer).await;
    producer.close().await;
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

/// `rdkafka-tasks`: [`run_kprod_tasks`] with librdkafka's `FutureProducer::send`, which
/// waits (without a timeout) while librdkafka's queue is full.
async fn run_rdkafka_tasks(
    args: Arc<Args>,
    bootstrap: String,
    topic: String,
    meter: Meter,
) -> Result<Measured, String> {
    let producer = future_producer(&args, &bootstrap, &topic, "bench-rdkafka-tasks").await?;
    let topic: Arc<str> = topic.into();
    let start = meter.start();
    let tally = send_from_tasks(&args, || {
        let (producer, topic, args) = (producer.clone(), topic.clone(), args.clone());
        move |i, buf: &[u8]| {
            let (producer, topic, buf) = (producer.clone(), topic.clone(), buf.to_vec());
            let partition = args.partition(i);
            async move {
                let mut record = FutureRecord::<(), [u8]>::to(&topic).payload(&buf[..]);
                record.partition = partition;
                producer
                    .send(record, Timeout::Never)
                    .await
                    .map(drop)
                    .map_err(|(e, _)| e)
            }
        }
    })
    .await?;
    let end = meter.end();
    drop(producer);
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

// ---------------------------------------------------------------------------------------------
// librdkafka
// ---------------------------------------------------------------------------------------------

fn rdkafka_config(args: &Args, bootstrap: &str, client_id: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "5")
        .set("linger.ms", args.linger_ms.to_string())
        .set("batch.size", args.batch_size.to_string())
        .set("batch.num.messages", "1000000")
        .set("compression.type", "none")
        .set(
            "queue.buffering.max.kbytes",
            args.rdkafka_queue_kbytes.to_string(),
        )
        .set("queue.buffering.max.messages", "10000000");
    c
}

/// Counts delivery reports, and wakes the sending thread once `wake_at` reports arrived.
struct Counting {
    done: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    wake_at: AtomicU64,
    sender: std::thread::Thread,
}

impl Counting {
    fn new() -> Self {
        Self {
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
            wake_at: AtomicU64::new(u64::MAX),
            sender: std::thread::current(),
        }
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// Parks the sending thread until `n` reports arrived or `deadline` passed; true if they
    /// arrived.
    fn wait_for(&self, n: u64, deadline: Instant) -> bool {
        self.wake_at.store(n, Ordering::SeqCst);
        let arrived = loop {
            if self.done() >= n {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            std::thread::park_timeout((deadline - now).min(Duration::from_millis(10)));
        };
        self.wake_at.store(u64::MAX, Ordering::SeqCst);
        arrived
    }

    /// Takes the counts so far and starts again from zero.
    fn take(&self) -> Tally {
        let done = self.done.swap(0, Ordering::SeqCst);
        let failed = self.failed.swap(0, Ordering::SeqCst);
        Tally {
            ok: done - failed,
            failed,
            first_error: self
                .first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        }
    }
}

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = r {
            let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| e.to_string());
            self.failed.fetch_add(1, Ordering::SeqCst);
        }
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if done >= self.wake_at.load(Ordering::SeqCst) {
            self.sender.unpark();
        }
    }
}

/// How many acknowledgements the rdkafka sender waits for when librdkafka's queue is full.
const QUEUE_FULL_WAIT: u64 = 1024;

/// librdkafka through a `ThreadedProducer`: the crate's polling thread serves the delivery
/// reports (blocking in `rd_kafka_queue_poll`), the calling thread only sends.
///
/// Not a `BaseProducer` polled by the sending thread: the crate's `poll(timeout)` keeps
/// polling until the whole timeout elapsed and rounds the remainder down to whole
/// milliseconds, so every call busy-spins for up to 1 ms after its first event; polled in a
/// loop that spin inflated librdkafka's CPU time. The polling thread calls `poll(100 ms)`,
/// so it spins at most ~1% of the time.
fn run_rdkafka(
    args: &Args,
    bootstrap: &str,
    topic: &str,
    meter: &Meter,
) -> Result<Measured, String> {
    let producer: ThreadedProducer<Counting> = rdkafka_config(args, bootstrap, "bench-rdkafka")
        .create_with_context(Counting::new())
        .map_err(|e| format!("rdkafka: {e}"))?;
    let ctx = producer.context().clone();
    let mut buf = payload(args.size);
    let deadline = Instant::now() + RUN_TIMEOUT;

    // Warm-up: connection, metadata, producer id.
    producer
        .send(
            BaseRecord::<(), [u8]>::to(topic)
                .payload(&buf[..])
                .partition(0),
        )
        .map_err(|(e, _)| format!("rdkafka warm-up record: {e}"))?;
    if !ctx.wait_for(1, deadline) {
        return Err("rdkafka warm-up record: no acknowledgement".into());
    }
    ctx.take()
        .check(1)
        .map_err(|e| format!("rdkafka warm-up record: {e}"))?;

    let start = meter.start();
    let mut refused = Tally::default();
    'send: for i in 0..args.messages {
        fill(&mut buf, i);
        let mut record = BaseRecord::<(), [u8]>::to(topic).payload(&buf[..]);
        record.partition = args.partition(i);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    if Instant::now() > deadline {
                        refused.record(Err("queue full until the run timed out"));
                        break 'send;
                    }
                    // Park until some acknowledgements freed space (`i` were sent).
                    let wait = (ctx.done() + QUEUE_FULL_WAIT).min(i);
                    ctx.wait_for(wait, deadline);
                }
                Err((e, _)) => {
                    refused.record(Err(e));
                    break 'send;
                }
            }
        }
    }
    if refused.failed == 0 {
        ctx.wait_for(args.messages, deadline);
    }
    let end = meter.end();

    let mut tally = ctx.take();
    tally.failed += refused.failed;
    tally.first_error = refused.first_error.or(tally.first_error);
    drop(producer);
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

/// A librdkafka `FutureProducer` with the bench's settings, its warm-up record (connection,
/// metadata, producer id) acknowledged.
async fn future_producer(
    args: &Args,
    bootstrap: &str,
    topic: &str,
    client_id: &str,
) -> Result<FutureProducer, String> {
    let producer: FutureProducer = rdkafka_config(args, bootstrap, client_id)
        .create()
        .map_err(|e| format!("rdkafka: {e}"))?;
    let warm = payload(args.size);
    let record = FutureRecord::<(), [u8]>::to(topic)
        .payload(&warm[..])
        .partition(0);
    if let Err((e, _)) = producer.send(record, Timeout::Never).await {
        return Err(format!("rdkafka warm-up record: {e}"));
    }
    Ok(producer)
}

async fn run_rdkafka_future(
    args: Arc<Args>,
    bootstrap: String,
    topic: String,
    meter: Meter,
) -> Result<Measured, String> {
    let producer = future_producer(&args, &bootstrap, &topic, "bench-rdkafka-future").await?;
    let mut buf = payload(args.size);

    let start = meter.start();
    let mut tally = Tally::default();
    let mut pending = InOrder::new();
    let settle =
        |tally: &mut Tally,
         r: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, _>| {
            tally.record(match r {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((e, _))) => Err(e.to_string()),
                Err(_) => Err("delivery future canceled".to_owned()),
            });
        };
    'send: for i in 0..args.messages {
        fill(&mut buf, i);
        let mut record = FutureRecord::<(), [u8]>::to(&topic).payload(&buf[..]);
        record.partition = args.partition(i);
        loop {
            match producer.send_result(record) {
                Ok(f) => {
                    pending.push(f);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    match pending.next().await {
                        Some(out) => settle(&mut tally, out),
                        None => tokio::time::sleep(Duration::from_millis(1)).await,
                    }
                }
                Err((e, _)) => {
                    tally.record(Err(e));
                    break 'send;
                }
            }
        }
        pending.take_ready(|r| settle(&mut tally, r));
    }
    while let Some(r) = pending.next().await {
        settle(&mut tally, r);
    }
    let end = meter.end();

    drop(producer);
    tally.check(args.messages)?;
    Ok(meter.measure(start, end))
}

// ---------------------------------------------------------------------------------------------
// The Java producer
// ---------------------------------------------------------------------------------------------

/// How long the JVM may take to create a producer and get its warm-up record acknowledged.
const JAVA_BEGIN_TIMEOUT: Duration = Duration::from_secs(90);

/// The JVM's flags (those of [`javaref::JavaRun::spawn`]), for the report.
const JAVA_FLAGS: &str = "-Xmx1g -XX:+UseSerialGC";

/// The producer settings the Java producer gets: the bench's. On Tansu, also
/// `metadata.cluster.check.enable=false`: otherwise kafka-clients 4.4 sends ApiVersions v5 with
/// the cluster id and node id it learned, which Tansu 0.6.0 (ApiVersions up to v4) cannot
/// decode; it drops the connection, and the producer never reaches the partition leader.
fn java_plan(args: &Args) -> BenchPlan {
    let mut extra = Vec::new();
    if args.broker == BrokerKind::Tansu {
        extra.push((
            "metadata.cluster.check.enable".to_owned(),
            "false".to_owned(),
        ));
    }
    BenchPlan {
        size: args.size,
        partitions: args.partitions as i32,
        keyless: args.keyless,
        producer: javaref::Flags {
            max_in_flight: Some(5),
            linger_ms: Some(args.linger_ms),
            batch_size: Some(u64::from(args.batch_size)),
            extra,
            ..javaref::Flags::default()
        },
    }
}

/// One run of `name` (the Java producer in its long-lived JVM, or franz-bench, which speaks
/// its protocol). Wall time and CPU are the program's own figures over its window; the
/// broker's and the machine's CPU are read here, from the `MEASURING` line to the result
/// line, as is the program's `/proc` CPU (the cross-check).
fn run_peer(
    java: &mut JavaBench,
    name: &str,
    args: &Args,
    topic: &str,
    meter: &Meter,
) -> Result<Measured, String> {
    let meter = Meter {
        client_stat: format!("/proc/{}/stat", java.pid()),
        ..meter.clone()
    };
    // The harness panics when the JVM dies or says nothing in time: a failed run here.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        java.begin(topic, args.messages, JAVA_BEGIN_TIMEOUT);
        let start = meter.start();
        let r = java.end(RUN_TIMEOUT + Duration::from_secs(30));
        let end = meter.end();
        r.map(|r| (r, start, end))
    }));
    let (r, start, end) = match outcome {
        Ok(r) => r.map_err(|e| format!("{name}: {e}"))?,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            return Err(format!("{name}: {msg}"));
        }
    };
    r.check().map_err(|e| format!("{name}: {e}"))?;
    if r.records != args.messages {
        return Err(format!(
            "{name}: sent {} records, not {}",
            r.records, args.messages
        ));
    }
    let mut m = meter.measure(start, end);
    let proc_cpu = m.cpu;
    m.wall = Duration::from_secs_f64(r.seconds);
    m.cpu = Duration::from_secs_f64(r.cpu_seconds);
    m.java = Some(JavaExtra {
        proc_cpu,
        jit_ms: r.jit_ms,
        gc_ms: r.gc_ms,
        gc_count: r.gc_count,
    });
    Ok(m)
}

/// The programs that speak the Java reference producer's bench protocol, when asked for.
struct Peers {
    java: Option<JavaBench>,
    franz: Option<JavaBench>,
}

/// `go version`'s output.
fn go_version() -> String {
    Command::new("go")
        .arg("version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "go: version unknown".into())
}

/// `java -version`'s first line.
fn java_version() -> String {
    Command::new("java")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "java: version unknown".into())
}

// ---------------------------------------------------------------------------------------------
// Brokers
// ---------------------------------------------------------------------------------------------

/// The `/proc/<pid>/stat` files of the broker's processes (`pids`), for
/// [`Meter::broker_stats`].
fn broker_stat_files(pids: &[u32]) -> Vec<String> {
    pids.iter().map(|p| format!("/proc/{p}/stat")).collect()
}

enum Broker {
    Tansu(Tansu),
    Kafka(Kafka),
}

impl Broker {
    /// Starts the broker(s); with `wire`, behind a counting proxy per node. Returns the
    /// bootstrap address the clients get.
    fn start(args: &Args, wire: Option<&Arc<WireCounters>>) -> Result<(Self, String), String> {
        let bind = || {
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind the wire proxy: {e}"))
        };
        let port = |l: &TcpListener| l.local_addr().map_or(0, |a| a.port());
        match (args.broker, wire) {
            (BrokerKind::Tansu, None) => {
                let tansu = Tansu::start();
                let bootstrap = tansu.addr().to_string();
                Ok((Self::Tansu(tansu), bootstrap))
            }
            (BrokerKind::Tansu, Some(counters)) => {
                let listener = bind()?;
                let p = port(&listener);
                let tansu = Tansu::start_advertising(p);
                start_wire_proxy(listener, tansu.addr(), counters.clone());
                Ok((Self::Tansu(tansu), format!("127.0.0.1:{p}")))
            }
            (BrokerKind::Kafka, None) => {
                let kafka = Kafka::start_with(args.kafka_options());
                let bootstrap = kafka.bootstrap();
                Ok((Self::Kafka(kafka), bootstrap))
            }
            (BrokerKind::Kafka, Some(counters)) => {
                let listeners = (0..args.kafka_nodes)
                    .map(|_| bind())
                    .collect::<Result<Vec<_>, _>>()?;
                let ports: Vec<u16> = listeners.iter().map(port).collect();
                let kafka = Kafka::start_with(args.kafka_options().advertise(ports.clone()));
                for (i, l) in listeners.into_iter().enumerate() {
                    start_wire_proxy(l, kafka.client_addr(i), counters.clone());
                }
                let bootstrap = ports
                    .iter()
                    .map(|p| format!("127.0.0.1:{p}"))
                    .collect::<Vec<_>>()
                    .join(",");
                Ok((Self::Kafka(kafka), bootstrap))
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Tansu(t) => format!(
                "Tansu {TANSU_VERSION} (in-memory storage, separate process) at {}",
                t.addr()
            ),
            Self::Kafka(k) => format!(
                "Apache Kafka {KAFKA_VERSION} (KRaft, {} node{} each broker and controller, \
                 JVM {}, log on disk) at {}",
                k.len(),
                if k.len() == 1 { "," } else { "s," },
                k.jvm_flags().join(" "),
                k.bootstrap()
            ),
        }
    }

    /// The broker processes' pids (Tansu: found among our children).
    fn pids(&self) -> Vec<u32> {
        match self {
            Self::Tansu(_) => find_broker_pid().into_iter().collect(),
            Self::Kafka(k) => (1..=k.len() as i32).filter_map(|id| k.pid(id)).collect(),
        }
    }

    /// `--fresh-broker`: kills Tansu and starts it again, empty, on the same port.
    fn restart(&mut self) -> Result<(), String> {
        match self {
            Self::Tansu(t) => {
                t.restart();
                Ok(())
            }
            Self::Kafka(_) => Err("--fresh-broker restarts Tansu only".into()),
        }
    }

    fn create_topic(&self, name: &str, partitions: u32) {
        match self {
            Self::Tansu(t) => t.create_topic(name, partitions),
            Self::Kafka(k) => k.create_topic(name, partitions as i32, k.len() as i32, None),
        }
    }

    /// Deletes a topic (Kafka only; used by `--rolling-topics`).
    fn delete_topic(&self, name: &str) {
        match self {
            Self::Tansu(_) => {}
            Self::Kafka(k) => k.delete_topic(name),
        }
    }

    /// Waits (at most `limit`) until no node's log directory holds a deleted partition log
    /// (`*-delete`) any more; returns how long it waited and how many remain.
    fn wait_deleted_logs(&self, limit: Duration) -> (Duration, usize) {
        let Self::Kafka(k) = self else {
            return (Duration::ZERO, 0);
        };
        let count = || {
            let Ok(nodes) = std::fs::read_dir(k.dir()) else {
                return 0;
            };
            nodes
                .flatten()
                .filter_map(|n| std::fs::read_dir(n.path().join("data")).ok())
                .flat_map(|d| d.flatten())
                .filter(|e| e.file_name().to_string_lossy().ends_with("-delete"))
                .count()
        };
        let t0 = Instant::now();
        // The broker renames the logs when it applies the deletion: give it a moment.
        std::thread::sleep(Duration::from_secs(2));
        loop {
            let left = count();
            if left == 0 || t0.elapsed() >= limit {
                return (t0.elapsed(), left);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Driver and report
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Run {
    round: u32,
    client: Client,
    m: Measured,
}

impl Run {
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.m.wall.as_secs_f64()
    }

    fn cpu_us(&self, n: u64) -> f64 {
        self.m.cpu.as_secs_f64() * 1e6 / n as f64
    }

    fn broker_us(&self, n: u64) -> Option<f64> {
        self.m.broker_cpu.map(|c| c.as_secs_f64() * 1e6 / n as f64)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// `VmHWM` from /proc/self/status.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_else(|| "?".into())
}

fn run_one(
    rt: &tokio::runtime::Runtime,
    args: &Arc<Args>,
    client: Client,
    bootstrap: &str,
    topic: &str,
    meter: &Meter,
    peers: &mut Peers,
) -> Result<Measured, String> {
    let (args2, b, t, m) = (
        args.clone(),
        bootstrap.to_owned(),
        topic.to_owned(),
        meter.clone(),
    );
    let task = match client {
        Client::Kprod => rt.spawn(async move { run_kprod(args2, b, t, m, 1, &[]).await }),
        Client::KprodMany => {
            rt.spawn(async move { run_kprod(args2, b, t, m, KPROD_MANY_CHUNK, &[]).await })
        }
        Client::KprodNocap => {
            rt.spawn(async move { run_kprod(args2, b, t, m, 1, &[KPROD_NOCAP]).await })
        }
        Client::RdkafkaFuture => rt.spawn(run_rdkafka_future(args2, b, t, m)),
        Client::KprodCallback => rt.spawn(run_kprod_callback(args2, b, t, m)),
        Client::KprodTasks => rt.spawn(run_kprod_tasks(args2, b, t, m)),
        Client::RdkafkaTasks => rt.spawn(run_rdkafka_tasks(args2, b, t, m)),
        Client::Rdkafka => return run_rdkafka(args, bootstrap, topic, meter),
        Client::Java => {
            let java = peers.java.as_mut().ok_or("java: the JVM is not running")?;
            return run_peer(java, "java", args, topic, meter);
        }
        Client::Franz => {
            let franz = peers
                .franz
                .as_mut()
                .ok_or("franz: franz-bench is not running")?;
            return run_peer(franz, "franz", args, topic, meter);
        }
    };
    // The watchdog waits on the main thread, outside the task: no timer in the task's polls.
    rt.block_on(async {
        tokio::select! {
            r = task => r.map_err(|e| format!("{} task: {e}", client.name()))?,
            () = tokio::time::sleep(RUN_TIMEOUT) => {
                Err(format!("{} run timed out after {RUN_TIMEOUT:?}", client.name()))
            }
        }
    })
}

fn report(args: &Args, runs: &[Run]) -> String {
    let n = args.messages;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:>5}  {:<15} {:>9} {:>12} {:>9} {:>12} {:>16} {:>12}",
        "round", "client", "wall s", "msgs/s", "CPU s", "CPU µs/msg", "broker µs/msg", "other load"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "{:>5}  {:<15} {:>9.3} {:>12.0} {:>9.2} {:>12.3} {:>16} {:>12}",
            r.round,
            r.client.name(),
            r.m.wall.as_secs_f64(),
            r.rate(n),
            r.m.cpu.as_secs_f64(),
            r.cpu_us(n),
            r.broker_us(n).map_or("?".into(), |b| format!("{b:.3}")),
            r.m.other_cpu.map_or("?".into(), |o| format!(
                "{:.2} CPUs",
                o.as_secs_f64() / r.m.wall.as_secs_f64()
            )),
        );
    }
    if runs.iter().any(|r| r.m.other_cpu.is_some()) {
        let _ = writeln!(
            out,
            "(other load: CPUs the rest of the machine kept busy on average during the run, from /proc/stat)"
        );
    }

    if runs.iter().any(|r| r.m.wire.is_some()) {
        let _ = writeln!(
            out,
            "\nwire (client to broker, timed window only):\n{:>5}  {:<15} {:>9} {:>9} {:>10} {:>12} {:>12} {:>11} {:>9}",
            "round", "client", "requests", "produce", "batches", "records", "recs/batch", "B/batch", "B/record"
        );
        for r in runs {
            let Some(w) = r.m.wire else { continue };
            let per = |a: u64, b: u64| {
                if b == 0 {
                    f64::NAN
                } else {
                    a as f64 / b as f64
                }
            };
            let _ = writeln!(
                out,
                "{:>5}  {:<15} {:>9} {:>9} {:>10} {:>12} {:>12.1} {:>11.0} {:>9.1}{}",
                r.round,
                r.client.name(),
                w.requests,
                w.produce_requests,
                w.batches,
                w.records,
                per(w.records, w.batches),
                per(w.batch_bytes, w.batches),
                per(w.batch_bytes, w.records),
                if w.unparsed > 0 {
                    format!("  ({} Produce requests not parsed)", w.unparsed)
                } else {
                    String::new()
                }
            );
        }
    }

    let java_runs: Vec<&Run> = runs.iter().filter(|r| r.m.java.is_some()).collect();
    if !java_runs.is_empty() {
        let _ = writeln!(
            out,
            "\njava and franz, inside their windows: CPU as the program measured it (the figure \
             used: the JVM's getProcessCpuTime, Go's getrusage) and from its /proc stat (bench \
             side, window a few ms wider); JIT (JVM only) and GC\n{:>5} {:<6} {:>11} {:>11} {:>8} {:>8} {:>4}",
            "round", "client", "own CPU s", "/proc CPU s", "JIT ms", "GC ms", "GCs"
        );
        for r in java_runs {
            let Some(j) = r.m.java else { continue };
            let _ = writeln!(
                out,
                "{:>5} {:<6} {:>11.2} {:>11.2} {:>8} {:>8} {:>4}",
                r.round,
                r.client.name(),
                r.m.cpu.as_secs_f64(),
                j.proc_cpu.as_secs_f64(),
                j.jit_ms,
                j.gc_ms,
                j.gc_count
            );
        }
    }

    let _ = writeln!(
        out,
        "\nsummary over {} rounds: median (min – max)\n{:<15} {:>34}   {:>27}   {:>13}",
        args.rounds, "client", "messages/s", "client CPU µs/message", "broker µs/msg"
    );
    for &c in &args.clients {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.client == c).collect();
        if mine.is_empty() {
            continue;
        }
        let rate = Spread::of(mine.iter().map(|r| r.rate(n)).collect());
        let cpu = Spread::of(mine.iter().map(|r| r.cpu_us(n)).collect());
        let broker: Vec<f64> = mine.iter().filter_map(|r| r.broker_us(n)).collect();
        let broker = (!broker.is_empty()).then(|| median(broker));
        let _ = writeln!(
            out,
            "{:<15} {:>34}   {:>27}   {:>13}",
            c.name(),
            format!(
                "{} ({} – {})",
                thousands(rate.median),
                thousands(rate.min),
                thousands(rate.max)
            ),
            format!("{:.3} ({:.3} – {:.3})", cpu.median, cpu.min, cpu.max),
            broker.map_or("?".into(), |b| format!("{b:.3}"))
        );
    }

    // Ratios of the runs of one round: the clients ran minutes apart at most, on the same
    // machine state; the spread over rounds is their noise.
    let pairs = [
        (Client::Kprod, Client::Rdkafka),
        (Client::Kprod, Client::Java),
        (Client::KprodMany, Client::Rdkafka),
        (Client::KprodMany, Client::Java),
        (Client::KprodMany, Client::Kprod),
        (Client::Java, Client::Rdkafka),
        (Client::Kprod, Client::Franz),
        (Client::KprodMany, Client::Franz),
        (Client::Franz, Client::Rdkafka),
        (Client::Franz, Client::Java),
        (Client::Kprod, Client::RdkafkaFuture),
        (Client::KprodCallback, Client::Rdkafka),
        (Client::KprodCallback, Client::Java),
        (Client::KprodCallback, Client::Franz),
        (Client::KprodCallback, Client::Kprod),
        (Client::KprodTasks, Client::RdkafkaTasks),
        (Client::KprodTasks, Client::Kprod),
        (Client::KprodNocap, Client::Kprod),
        (Client::KprodNocap, Client::Rdkafka),
        (Client::KprodNocap, Client::Java),
    ];
    let mut ratios = Vec::new();
    for (a, b) in pairs {
        let mut rate = Vec::new();
        let mut cpu = Vec::new();
        let mut lines = String::new();
        for round in 1..=args.rounds {
            let find = |cl| runs.iter().find(|r| r.round == round && r.client == cl);
            if let (Some(x), Some(y)) = (find(a), find(b)) {
                let (rr, cr) = (x.rate(n) / y.rate(n), x.cpu_us(n) / y.cpu_us(n));
                rate.push(rr);
                cpu.push(cr);
                let _ = write!(lines, "  r{round}: {rr:.2}x/{cr:.2}x");
            }
        }
        if !rate.is_empty() {
            ratios.push((a, b, Spread::of(rate), Spread::of(cpu), lines));
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(
            out,
            "\nratios per round: median (min – max) over {} rounds\n{:<24} {:>26}   {:>26}",
            args.rounds, "", "throughput", "CPU per message"
        );
        for (a, b, rate, cpu, _) in &ratios {
            let _ = writeln!(
                out,
                "{:<24} {:>26}   {:>26}",
                format!("{}/{}", a.name(), b.name()),
                format!("{:.2}x ({:.2} – {:.2})", rate.median, rate.min, rate.max),
                format!("{:.2}x ({:.2} – {:.2})", cpu.median, cpu.min, cpu.max),
            );
        }
        let _ = writeln!(out, "per round (throughput/CPU per message):");
        for (a, b, _, _, lines) in &ratios {
            let _ = writeln!(out, "  {}/{}:{lines}", a.name(), b.name());
        }
    }
    out
}

/// Median, minimum and maximum.
#[derive(Debug, Clone, Copy)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(v: Vec<f64>) -> Self {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Self {
            median: median(v),
            min,
            max,
        }
    }
}

/// `1234567.8` as `1,234,568`.
fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if x < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// Runs every client once, in `order`, each to its own topic; prints a line per run. `round`
/// 0 is a warm-up round (`label` says which). With `--keep-going` a failed run is printed,
/// counted in `failed` and left out; otherwise it ends the round with an error.
#[allow(clippy::too_many_arguments)]
fn run_round(
    rt: &tokio::runtime::Runtime,
    args: &Arc<Args>,
    order: &[Client],
    label: &str,
    topic: impl Fn(Client) -> String,
    bootstrap: &str,
    broker: &mut Broker,
    meter: &mut Meter,
    peers: &mut Peers,
    failed: &mut u32,
) -> Result<Vec<(Client, Measured)>, String> {
    let mut out = Vec::new();
    for &c in order {
        if args.fresh_broker {
            // Outside the timed window: a new, empty Tansu on the same port, the run's
            // topic created on it, and its new process measured.
            broker.restart()?;
            broker.create_topic(&topic(c), args.partitions);
            meter.broker_stats = broker_stat_files(&broker.pids());
        }
        let m = match run_one(rt, args, c, bootstrap, &topic(c), meter, peers) {
            Ok(m) => m,
            Err(e) if args.keep_going => {
                *failed += 1;
                println!("{label} {:<15} FAILED (left out): {e}", c.name());
                continue;
            }
            Err(e) => return Err(format!("{label}, {}: FAILED: {e}", c.name())),
        };
        let n = args.messages as f64;
        println!(
            "{label} {:<15} {:>8.3} s {:>10.0} msgs/s {:>8.3} CPU µs/msg",
            c.name(),
            m.wall.as_secs_f64(),
            n / m.wall.as_secs_f64(),
            m.cpu.as_secs_f64() * 1e6 / n
        );
        out.push((c, m));
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            if !e.is_empty() {
                eprintln!("bench-e2e: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };

    let ticks_per_second = clock_ticks_per_second();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench-e2e: {} messages x {} bytes per run, {} rounds after {} warm-up round{}, {} partitions ({}), linger.ms={}, batch.size={}",
        args.messages,
        args.size,
        args.rounds,
        args.warmup_rounds,
        if args.warmup_rounds == 1 { "" } else { "s" },
        args.partitions,
        if args.keyless {
            "each client's keyless partitioner"
        } else {
            "message i to partition i mod P"
        },
        args.linger_ms,
        args.batch_size
    );
    println!(
        "clients: {}; tokio multi-thread runtime, 2 workers; CLK_TCK={ticks_per_second}; {cores} CPUs; load average at start {}",
        args.clients.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        loadavg()
    );
    println!(
        "librdkafka {}{}",
        rdkafka::util::get_rdkafka_version().1,
        if args.clients.contains(&Client::Java) {
            format!(
                "; Java producer kafka-clients {KAFKA_VERSION} in one JVM ({JAVA_FLAGS}; {})",
                java_version()
            )
        } else {
            String::new()
        },
    );
    if args.clients.contains(&Client::Franz) {
        println!("franz-go {} ({})", franz::version(), go_version());
    }

    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench-e2e: cannot build the tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };

    let wire = args.wire_stats.then(|| Arc::new(WireCounters::default()));
    let (mut broker, bootstrap) = match Broker::start(&args, wire.as_ref()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bench-e2e: {e}");
            return ExitCode::from(2);
        }
    };
    if wire.is_some() {
        println!("--wire-stats: clients go through a counting proxy at {bootstrap}; CPU and throughput include it");
    }
    let broker_pids = broker.pids();
    if broker_pids.is_empty() {
        eprintln!("warning: broker process not found; its CPU is not reported");
    }
    let mut meter = Meter {
        ticks_per_second,
        client_stat: "/proc/self/stat".into(),
        broker_stats: broker_stat_files(&broker_pids),
        wire,
    };
    println!(
        "broker: {} (pid {})",
        broker.describe(),
        broker_pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );

    // Topics up front: one per client per round (round 0 and below: warm-up rounds).
    let topic = |round: i64, c: Client| {
        if args.same_topic {
            format!("bench-{}", c.name())
        } else if round > 0 {
            format!("bench-{}-r{round}", c.name())
        } else {
            format!("bench-{}-w{}", c.name(), 1 - round)
        }
    };
    let first = 1 - i64::from(args.warmup_rounds);
    let created = if args.same_topic || args.rolling_topics {
        first..=first
    } else {
        first..=i64::from(args.rounds)
    };
    // With --fresh-broker each run's topic is created on its own fresh broker.
    if !args.fresh_broker {
        for round in created {
            for &c in &args.clients {
                broker.create_topic(&topic(round, c), args.partitions);
            }
        }
    }

    let mut peers = Peers {
        java: args.clients.contains(&Client::Java).then(|| {
            let j = JavaBench::start(&bootstrap, &java_plan(&args));
            println!("java: JVM pid {} ready", j.pid());
            j
        }),
        franz: args.clients.contains(&Client::Franz).then(|| {
            let tansu = (args.broker == BrokerKind::Tansu).then_some("3.9");
            let f = franz::start_bench(&bootstrap, &java_plan(&args), tansu);
            println!("franz: franz-bench pid {} ready", f.pid());
            f
        }),
    };

    let mut runs = Vec::new();
    let mut failed = 0;
    for round in first..=i64::from(args.rounds) {
        // Alternate the order: rotate the client list by the round number.
        let k = args.clients.len() as i64;
        let order: Vec<Client> = (0..k)
            .map(|j| args.clients[(j + round - first).rem_euclid(k) as usize])
            .collect();
        let label = if round > 0 {
            format!("round {round}")
        } else {
            format!("warm-up {}", round - first + 1)
        };
        if args.rolling_topics && round > first {
            for &c in &args.clients {
                broker.create_topic(&topic(round, c), args.partitions);
            }
        }
        let t = |c| topic(round, c);
        let r = run_round(
            &rt,
            &args,
            &order,
            &label,
            t,
            &bootstrap,
            &mut broker,
            &mut meter,
            &mut peers,
            &mut failed,
        );
        if args.rolling_topics {
            for &c in &args.clients {
                broker.delete_topic(&topic(round, c));
            }
            let (waited, left) = broker.wait_deleted_logs(Duration::from_secs(150));
            println!(
                "(--rolling-topics: the round's topics deleted; waited {:.0} s for the broker to \
                 remove their logs, {left} left)",
                waited.as_secs_f64()
            );
        }
        match r {
            Ok(done) if round > 0 => {
                runs.extend(done.into_iter().map(|(client, m)| Run {
                    round: round as u32,
                    client,
                    m,
                }));
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("bench-e2e: {e}");
                print!("{}", report(&args, &runs));
                return ExitCode::from(1);
            }
        }
    }

    print!("{}", report(&args, &runs));
    println!(
        "\nload average at end {}; this process's peak RSS {}",
        loadavg(),
        peak_rss()
    );
    for (name, p) in [
        ("the Java producer's JVM", peers.java),
        ("franz-bench", peers.franz),
    ] {
        let Some(p) = p else { continue };
        let f = p.finish(Duration::from_secs(60));
        if !f.status.success() {
            eprintln!("warning: {name} exited with {}: {}", f.status, f.stderr);
        }
    }
    drop(broker);
    if failed > 0 {
        eprintln!("bench-e2e: {failed} run(s) failed and were left out (--keep-going)");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
