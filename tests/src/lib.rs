//! Shared harness for kprod integration tests against real brokers.
//!
//! - [`Tansu`]: a Tansu broker (Kafka-compatible, in-memory storage) in a child process on a
//!   free 127.0.0.1 port, killed on drop. Install it with `scripts/install-tansu.sh`.
//! - [`WireClient`] and the free functions next to it: a blocking raw Kafka wire client over
//!   `std::net::TcpStream`, built on kprod-core's codec (`encode_request`, `decode_response`).
//! - [`reader`]: the independent reader (librdkafka's consumer).
//! - [`seed`]: the seed scenario and the verdict that compares kprod's reports with the log.
//! - [`proxy`]: a TCP fault proxy (cut, delay, blackhole, truncate, corrupt, refuse) between a
//!   client and a broker; [`Tansu::start_advertising`] puts it in the broker's metadata.
//! - [`ledger`]: what a fault scenario sent and what kprod reported, checked against the log.
//! - [`kafka`]: Apache Kafka (KRaft, 1 or 3 nodes) in child JVMs, with kill/stop/pause/restart
//!   of one node for leader changes. Install it with `scripts/install-kafka.sh`.
//! - [`javaref`]: the Java reference producer (Apache Kafka's kafka-clients) run on the ledger
//!   and seed scenarios and judged by the same checks. Build it with `scripts/install-java-ref.sh`.
//! - [`faults`]: the fault-proxy scenarios, run on Tansu and on a 3-node Kafka cluster.
//! - [`fuzz`]: the seeded fuzzer of kprod-core's decoders and whole producer.

pub mod e2e;
pub mod faults;
pub mod franz;
pub mod fuzz;
pub mod javaref;
pub mod kafka;
pub mod kfake;
pub mod ledger;
pub mod log_counter;
pub mod proxy;
pub mod reader;
pub mod seed;

pub use kafka::{Kafka, KafkaOptions};

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use kprod_core::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::frame::DEFAULT_MAX_FRAME_SIZE;
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::produce::{
    PartitionProduceData, PartitionProduceResponse, ProduceRequest, TopicProduceData,
};
use kprod_core::protocol::record_batch::RecordBatchBuilder;
use kprod_core::protocol::{
    decode_response, encode_request, negotiate_versions, DecodeError, ErrorCode, MaxVersions,
    Request, RequestHeader, ResponseHeader, VersionRange,
};

/// Tansu's version, as installed by `scripts/install-tansu.sh`.
pub const TANSU_VERSION: &str = "0.6.0";
/// The node id Tansu gives its single broker.
pub const TANSU_NODE_ID: i32 = 111;

/// How long a broker may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Connect timeout of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);
/// Pause between two readiness probes.
const PROBE_PAUSE: Duration = Duration::from_millis(10);
/// Attempts to start a broker when it exits early (another process took the port).
const START_ATTEMPTS: u32 = 3;

/// A Tansu broker running in a child process with in-memory storage.
///
/// The child is killed when this value is dropped. Its stdout and stderr go to a log file in
/// a temporary directory, which is removed on drop unless the thread is panicking (then its
/// path is printed so the log can be read).
#[derive(Debug)]
pub struct Tansu {
    child: Child,
    binary: PathBuf,
    port: u16,
    advertised_port: u16,
    restarts: u32,
    dir: PathBuf,
    log: PathBuf,
}

impl Tansu {
    /// The Tansu binary: `$KPROD_TANSU` if set, else
    /// `${KPROD_CACHE:-$HOME/.cache/kprod}/tansu-0.6.0/tansu`.
    ///
    /// # Panics
    /// If there is no file there.
    pub fn binary() -> PathBuf {
        let path = match std::env::var_os("KPROD_TANSU") {
            Some(p) => PathBuf::from(p),
            None => cache_dir()
                .join(format!("tansu-{TANSU_VERSION}"))
                .join("tansu"),
        };
        assert!(
            path.is_file(),
            "Tansu not found at {}; run scripts/install-tansu.sh",
            path.display()
        );
        path
    }

    /// Starts a broker on a free 127.0.0.1 port and waits until it accepts TCP connections.
    ///
    /// # Panics
    /// If the binary is missing, or the broker exits or is not ready within 15 s (the panic
    /// message carries the tail of its log).
    pub fn start() -> Self {
        Self::start_inner(None)
    }

    /// Starts a broker like [`Self::start`], advertising `127.0.0.1:advertised_port` in
    /// Metadata instead of its own address: put a proxy there (see [`proxy::Proxy`]) and
    /// every connection a client opens from metadata goes through it.
    ///
    /// # Panics
    /// As [`Self::start`].
    pub fn start_advertising(advertised_port: u16) -> Self {
        Self::start_inner(Some(advertised_port))
    }

    fn start_inner(advertised_port: Option<u16>) -> Self {
        let binary = Self::binary();
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = temp_dir("tansu");
            let log = dir.join("tansu.log");
            let child = spawn_broker(&binary, port, advertised_port.unwrap_or(port), &log);
            let mut tansu = Self {
                child,
                binary: binary.clone(),
                port,
                advertised_port: advertised_port.unwrap_or(port),
                restarts: 0,
                dir,
                log,
            };
            match tansu.wait_ready() {
                Ok(()) => return tansu,
                // Exited early: most likely another process took the port in between.
                Err(Startup::Exited(msg)) => last_failure = msg,
                Err(Startup::TimedOut(msg)) => panic!("{msg}"),
            }
        }
        panic!("Tansu did not start in {START_ATTEMPTS} attempts; last: {last_failure}")
    }

    fn wait_ready(&mut self) -> Result<(), Startup> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = self.addr();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Startup::Exited(format!(
                    "Tansu on port {} exited with {status} before accepting connections; log {}:\n{}",
                    self.port,
                    self.log.display(),
                    self.log_tail(40)
                )));
            }
            if TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Startup::TimedOut(format!(
                    "Tansu on port {} did not accept connections within {READY_TIMEOUT:?}; log {}:\n{}",
                    self.port,
                    self.log.display(),
                    self.log_tail(40)
                )));
            }
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Kills the broker (SIGKILL) and starts it again on the same port, with fresh memory
    /// storage: it forgets every topic, record and producer. Its earlier log is kept beside
    /// the new one.
    ///
    /// # Panics
    /// If it does not accept connections again within 15 s (the message carries its log).
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.restarts += 1;
        let kept = self
            .log
            .with_extension(format!("log.before-restart-{}", self.restarts));
        let _ = std::fs::rename(&self.log, kept);
        self.child = spawn_broker(&self.binary, self.port, self.advertised_port, &self.log);
        if let Err(Startup::Exited(msg) | Startup::TimedOut(msg)) = self.wait_ready() {
            panic!("Tansu did not come back after a restart: {msg}");
        }
    }

    /// The broker's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// The broker process's id (a new one after [`Self::restart`]), to signal it, e.g.
    /// `kill -STOP` to pause it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The broker's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker's URL, as the Tansu CLI takes it: `tcp://127.0.0.1:P`.
    pub fn url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }

    /// The broker's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log.display()));
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Creates a topic with `tansu topic create --broker URL --partitions N NAME`.
    ///
    /// # Panics
    /// If the command cannot run or fails.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(&self.binary)
            .args(["topic", "create", "--broker", &self.url(), "--partitions"])
            .arg(partitions.to_string())
            .arg(name)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        assert!(
            out.status.success(),
            "tansu topic create {name} failed with {}:\nstdout: {}\nstderr: {}\nbroker log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail(20)
        );
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("Tansu log kept at {}", self.log.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

enum Startup {
    Exited(String),
    TimedOut(String),
}

fn spawn_broker(binary: &Path, port: u16, advertised_port: u16, log: &Path) -> Child {
    let url = format!("tcp://127.0.0.1:{port}");
    let advertised = format!("tcp://127.0.0.1:{advertised_port}");
    let out = std::fs::File::create(log)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
    let err = out
        .try_clone()
        .unwrap_or_else(|e| panic!("cannot reopen {}: {e}", log.display()));
    Command::new(binary)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &advertised,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        // Keep the broker hermetic: no exporter from the environment.
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()))
}

/// A run's seed: `$var` if it holds a number, else one from the clock; printed as
/// `var=SEED` so that a run can be replayed.
pub fn seed_from_env(var: &str) -> u64 {
    let seed = std::env::var(var)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos() as u64
        });
    println!("{var}={seed}");
    seed
}

/// The lines a child writes to `out`, read on a thread of their own until it closes or the
/// receiver is dropped.
pub(crate) fn read_lines(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in io::BufRead::lines(io::BufReader::new(out)) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The install cache of `scripts/install-*.sh`: `$KPROD_CACHE`, else `$HOME/.cache/kprod`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("KPROD_CACHE") {
        Some(c) => PathBuf::from(c),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache").join("kprod")
        }
    }
}

/// A port for a broker listener, free when this returns and never handed out
/// twice by this process.
///
/// Ports come from below Linux's ephemeral range (32768 and up by default), so the
/// kernel never gives one of them to a port-0 bind or to an outgoing
/// connection in the time between this check and the broker's bind. Binding
/// port 0 and releasing it, as this did before, let the kernel hand the same
/// port out twice: CI once got one port for a Kafka node's client and
/// controller listeners, and the node refused to start. Each process starts
/// at its own place in the range (from its pid and the clock), so test
/// binaries run at the same time rarely meet; the bind check skips ports
/// already taken.
pub fn free_port() -> u16 {
    const LOW: u32 = 10_000;
    // The ephemeral range's first port, 32768 unless the machine says otherwise.
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    // A machine whose ephemeral range starts lower (a container with 1024-65535, say)
    // leaves no port the kernel never hands out: ports 10000-19999 are used then, checked
    // by a bind as always, and a port-0 bind may meet one of them in the short time before
    // the broker binds it (rare; before, every broker test failed on such a machine).
    let ephemeral = if ephemeral >= LOW + 1_000 {
        ephemeral
    } else {
        LOW + 10_000
    };
    let span = ephemeral - LOW;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    if NEXT.load(Ordering::Relaxed) == u32::MAX {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let start = (std::process::id().wrapping_mul(7_919) ^ nanos) % span;
        let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    }
    for _ in 0..span {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % span) as u16;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 from {LOW} to {ephemeral}");
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(prefix: &str) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "kprod-{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

// ---------------------------------------------------------------------------------------------
// Raw wire client
// ---------------------------------------------------------------------------------------------

/// What can go wrong on the raw wire.
#[derive(Debug)]
pub enum WireError {
    /// The socket failed.
    Io(io::Error),
    /// A frame's size prefix was negative or above [`DEFAULT_MAX_FRAME_SIZE`].
    FrameSize(i32),
    /// A response did not decode.
    Decode(DecodeError),
    /// A response answered another request.
    CorrelationId {
        /// The id of the request sent.
        expected: i32,
        /// The id in the response.
        got: i32,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "i/o: {e}"),
            Self::FrameSize(n) => write!(f, "frame size {n} out of range"),
            Self::Decode(e) => write!(f, "decode: {e}"),
            Self::CorrelationId { expected, got } => {
                write!(f, "correlation id {got}, expected {expected}")
            }
        }
    }
}

impl std::error::Error for WireError {}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

/// Writes one whole frame (size prefix included, as `encode_request` returns it).
pub fn send_frame(w: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame)?;
    w.flush()
}

/// Encodes a hand-made request frame: size prefix, `header` encoded as header version
/// `header_version` (1 or 2), then `body` as given. For versions our codec does not support,
/// or deliberately malformed requests.
pub fn encode_raw_request(header: &RequestHeader, header_version: i16, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(64 + body.len());
    buf.put_i32(0);
    header.encode(header_version, &mut buf);
    buf.put_slice(body);
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

/// Encodes `req` at `version` and writes it.
pub fn send_request<R: Request>(
    w: &mut impl Write,
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> io::Result<()> {
    send_frame(w, &encode_request(req, version, correlation_id, client_id))
}

/// Reads one frame: a 4-byte size, then that many bytes. Returns the frame without its size.
pub fn read_frame(r: &mut impl Read) -> Result<Bytes, WireError> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size)?;
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > DEFAULT_MAX_FRAME_SIZE {
        return Err(WireError::FrameSize(size));
    }
    let mut body = vec![0u8; size as usize];
    r.read_exact(&mut body)?;
    Ok(Bytes::from(body))
}

/// Reads one response frame and decodes it as the response to `R` at `version`.
pub fn read_response<R: Request>(
    r: &mut impl Read,
    version: i16,
) -> Result<(ResponseHeader, R::Response), WireError> {
    let frame = read_frame(r)?;
    Ok(decode_response::<R>(version, frame)?)
}

/// A blocking Kafka connection that numbers its requests.
#[derive(Debug)]
pub struct WireClient {
    stream: TcpStream,
    next_correlation_id: i32,
    client_id: Option<String>,
}

impl WireClient {
    /// Connects with client id `kprod-tests` and 10 s read and write timeouts.
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(Self {
            stream,
            next_correlation_id: 1,
            client_id: Some("kprod-tests".to_owned()),
        })
    }

    /// The client id sent in request headers.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// The next correlation id, consumed.
    pub fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// The underlying stream, for raw access.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Encodes `req` at `version` as a whole frame with a fresh correlation id, without
    /// sending it. Returns the frame and its correlation id.
    pub fn encode<R: Request>(&mut self, req: &R, version: i16) -> (Bytes, i32) {
        let id = self.next_correlation_id();
        (
            encode_request(req, version, id, self.client_id.as_deref()),
            id,
        )
    }

    /// Writes one whole frame (size prefix included).
    pub fn send_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        send_frame(&mut self.stream, frame)
    }

    /// Sends `req` at `version`; returns its correlation id.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> io::Result<i32> {
        let (frame, id) = self.encode(req, version);
        self.send_frame(&frame)?;
        Ok(id)
    }

    /// Reads one frame (without its size prefix).
    pub fn read_frame(&mut self) -> Result<Bytes, WireError> {
        read_frame(&mut self.stream)
    }

    /// Reads the response to `R` at `version` and checks its correlation id.
    pub fn recv<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> Result<R::Response, WireError> {
        let (header, body) = read_response::<R>(&mut self.stream, version)?;
        if header.correlation_id != correlation_id {
            return Err(WireError::CorrelationId {
                expected: correlation_id,
                got: header.correlation_id,
            });
        }
        Ok(body)
    }

    /// Sends `req` at `version` and reads its response.
    pub fn call<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, WireError> {
        let id = self.send(req, version)?;
        self.recv::<R>(version, id)
    }
}

/// A record batch of `n` records (key `key`, values `record <sequence>`) under producer
/// `pid`/`epoch` starting at `base_sequence`, timestamped now.
pub fn numbered_batch(pid: i64, epoch: i16, base_sequence: i32, n: i32) -> Bytes {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1_700_000_000_000, |d| d.as_millis() as i64);
    let mut b = RecordBatchBuilder::with_capacity(256);
    for i in 0..n {
        let value = format!("record {}", base_sequence + i);
        b.push(
            now + i64::from(i),
            Some(b"key"),
            Some(value.as_bytes()),
            &[],
        );
    }
    b.seal(pid, epoch, base_sequence)
}

/// A Produce request (acks=all, 10 s timeout) of one batch to `topic`/`partition`.
pub fn produce_request(topic: &str, partition: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
            }],
        }],
    }
}

impl WireClient {
    /// Sends one already-encoded Produce frame for one partition and returns that
    /// partition's result (asserting the response names exactly it).
    pub fn produce_frame(
        &mut self,
        topic: &str,
        frame: &[u8],
        correlation_id: i32,
        version: i16,
        partition: i32,
    ) -> PartitionProduceResponse {
        self.send_frame(frame).expect("send Produce");
        let resp = self
            .recv::<ProduceRequest>(version, correlation_id)
            .expect("Produce response");
        assert_eq!(resp.responses.len(), 1, "{resp:?}");
        let t = &resp.responses[0];
        assert_eq!(t.name, topic);
        assert_eq!(t.partition_responses.len(), 1, "{resp:?}");
        let p = t.partition_responses[0].clone();
        assert_eq!(p.index, partition);
        p
    }

    /// Produces `records` to `topic`/`partition` and returns the partition's result.
    pub fn produce(
        &mut self,
        topic: &str,
        version: i16,
        partition: i32,
        records: Bytes,
    ) -> PartitionProduceResponse {
        let (frame, id) = self.encode(&produce_request(topic, partition, records), version);
        self.produce_frame(topic, &frame, id, version, partition)
    }
}

/// What a raw-wire test negotiated with a broker: kprod's newest version of each API within the
/// broker's advertised range, and the ranges themselves (for tests that assert them).
#[derive(Debug, Clone)]
pub struct WireVersions {
    /// Produce version.
    pub produce: i16,
    /// Metadata version.
    pub metadata: i16,
    /// InitProducerId version.
    pub init_producer_id: i16,
    /// The broker's ApiVersions v3 answer.
    pub advertised: ApiVersionsResponse,
}

impl WireVersions {
    /// The broker's advertised range for `key` (panics naming `key` if it is not advertised).
    pub fn range(&self, key: i16) -> VersionRange {
        self.advertised
            .range_of(key)
            .unwrap_or_else(|| panic!("api key {key} not advertised: {:?}", self.advertised))
    }
}

impl WireClient {
    /// ApiVersions v3 with kprod's software name and version, then the versions kprod's own
    /// negotiation picks from the answer, uncapped (panics if an API has none: the broker is
    /// unusable).
    pub fn negotiate(&mut self) -> WireVersions {
        let req = ApiVersionsRequest {
            client_software_name: "kprod".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        };
        let advertised = self.call(&req, 3).expect("ApiVersions v3");
        assert_eq!(
            advertised.error_code, 0,
            "ApiVersions error: {advertised:?}"
        );
        let v = negotiate_versions(&advertised, 3, &MaxVersions::NONE)
            .unwrap_or_else(|api| panic!("no common version of {api}: {advertised:?}"));
        WireVersions {
            produce: v.produce,
            metadata: v.metadata,
            init_producer_id: v.init_producer_id,
            advertised,
        }
    }

    /// InitProducerId(`pid`, `epoch`) at `version`, asked again while the broker is still
    /// starting (COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE: its producer-id
    /// manager has no block of ids yet), for up to 30 s. Returns the first other answer, or the
    /// last one at the deadline.
    pub fn init_producer_id(
        &mut self,
        version: i16,
        pid: i64,
        epoch: i16,
    ) -> InitProducerIdResponse {
        let req = InitProducerIdRequest {
            producer_id: pid,
            producer_epoch: epoch,
            ..InitProducerIdRequest::default()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.call(&req, version).expect("InitProducerId");
            let starting = matches!(
                ErrorCode::from_i16(r.error_code),
                ErrorCode::CoordinatorLoadInProgress | ErrorCode::CoordinatorNotAvailable
            );
            if !starting || Instant::now() > deadline {
                return r;
            }
            // Retry pacing while the broker starts, not synchronisation.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Where a build script of this checkout (`scripts/install-*.sh`, which print the folder on
/// their last line and take `--where` to print it without building) puts its build: `$env`
/// if set, else what `script --where` prints.
///
/// # Panics
/// If the script cannot run or fails.
pub(crate) fn built_dir(env: &str, script: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let out = Command::new("bash")
        .arg(script)
        .arg("--where")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} --where failed ({}): {}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(text.lines().last().unwrap_or_default().trim())
}

/// `base` producer properties with `over` applied on top: an entry of `over` replaces the
/// entries of `base` with the same key (a property list that names one setting twice with
/// different values is refused), in the order given. For the bench binaries' `--set`-style
/// options.
pub fn override_properties<'a>(
    mut base: Vec<(&'a str, &'a str)>,
    over: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(&'a str, &'a str)> {
    for (k, v) in over {
        base.retain(|(bk, _)| *bk != k);
        base.push((k, v));
    }
    base
}
