//! A Kafka idempotent producer for tokio: every record is written once and in send order per
//! partition, or fails with a truthful statement of whether it may be in the log anyway.
//!
//! This crate is the tokio driver of [`kprod_core::Producer`], a sans-IO state machine that
//! makes every protocol decision; it is the only dependency an application needs (the types
//! it works with are re-exported here: [`Record`], [`TopicName`], [`Header`], [`ProducerConfig`],
//! [`Persistence`], [`FailureReason`], [`FatalError`], [`ErrorCode`], [`Bytes`], and the
//! core itself as [`kprod_core`]).
//!
//! # Quick start
//!
//! ```no_run
//! use kprod_tokio::{ProducerHandle, Record, TopicName};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // The Java client's (or librdkafka's) property names.
//! let producer = ProducerHandle::from_properties(&[("bootstrap.servers", "localhost:9092")])?;
//! // Wait for one record's acknowledgement ...
//! let delivery = producer.send(Record::new("events", "hello")).await?;
//! println!("partition {} offset {:?}", delivery.partition, delivery.offset);
//! // ... or keep many in flight: `enqueue` returns once the producer holds the record.
//! let pending = producer
//!     .enqueue(Record::new("events", "world").with_key("user-1"))
//!     .await?;
//! pending.await?;
//! // ... or have a callback told, as the Java client's `Callback`: no future per record.
//! // A topic name made once is shared by every record (no `String` each).
//! const EVENTS: TopicName = TopicName::from_static("events");
//! producer
//!     .enqueue_with(Record::new(EVENTS, "!"), |outcome| {
//!         if let Err(e) = outcome {
//!             eprintln!("failed: {e}");
//!         }
//!     })
//!     .await?;
//! producer.close().await; // delivers what is buffered, then stops
//! # Ok(()) }
//! ```
//!
//! The examples in `io-tokio/examples/` run as they are against a broker
//! (`cargo run -p kprod-tokio --example quickstart -- localhost:9092 topic`): `quickstart`,
//! `keyed_ordering` (one partition per key, in send order), `graceful_shutdown` (Ctrl-C,
//! `flush_timeout`, accounting for every record) and `possibly_persisted` (what to do with each
//! kind of failure).
//!
//! # Configuration
//!
//! [`config_from_properties`] and [`ClientConfig::from_properties`] take Kafka producer
//! properties: the Java client's names and librdkafka's aliases of the same settings. A
//! property kprod cannot honour (`transactional.id`, `key.serializer`, ...) is
//! refused with an error that names it and says why; none is silently ignored. The full list
//! is on [`config_from_properties`]. A [`ProducerConfig`] can also be built directly.
//!
//! # Outcomes
//!
//! Every accepted record resolves exactly once (its [`DeliveryFuture`], or its callback with
//! [`ProducerHandle::enqueue_with`]): [`Delivery`] (partition and offset), or a
//! [`DeliveryError`] whose [`DeliveryError::persisted`] is
//!
//! - [`Persistence::NotPersisted`]: the record is not in the log and never will be; sending
//!   it again cannot duplicate it;
//! - [`Persistence::PossiblyPersisted`]: an attempt's outcome was never learned (a timeout
//!   after the request went out, a lost connection); it may be in the log, so sending it
//!   again may duplicate it. Reconcile instead (see `examples/possibly_persisted.rs`).
//!
//! Each [`DeliveryError`] hands its record back ([`DeliveryError::record`],
//! [`DeliveryError::into_record`]): send it again, re-route it or persist it without keeping
//! a copy (see `examples/possibly_persisted.rs`).
//!
//! Callbacks run on the producer's task after the driver lets go of its lock: they may call
//! what does not wait (`enqueue_with` of a record that fits, `tokio::spawn` of a task that
//! uses the producer), but must never *block on* the producer: `block_on(h.flush())`,
//! `close()`, `metrics()`, awaiting a [`DeliveryFuture`] or a send waiting for memory all
//! wait for the very task the callback holds up, for ever. Code of the application that runs
//! *under* that lock must not call the producer at all: a [`Connector::fatal_reason`], a
//! [`TokenProvider`], the `Drop` of a record's payload owner (`Bytes::from_owner`; a record's
//! bytes are copied into its batch, and the owner dropped, while the record is taken, or
//! when a send whose caller gave up is discarded), and the `Drop` of what an
//! [`ProducerHandle::enqueue_with`] callback captured when its record is refused or its
//! waiting send is discarded. A producer call there waits for the lock its own thread
//! holds, for ever.
//!
//! ## Trading durability for throughput: `acks` 0 and 1
//!
//! By default kprod is idempotent with `acks=all`. With `enable.idempotence=false` it also
//! takes `acks=1` and `acks=0` (with idempotence on they are refused: idempotence needs
//! `acks=all`). A [`Delivery`] then says what the broker confirmed in
//! [`Delivery::acknowledgement`]: [`Acknowledgement::Leader`] under `acks=1` (at its offset,
//! written by the leader only), [`Acknowledgement::Unacknowledged`] under `acks=0` (handed to
//! the connection, no offset: Kafka never answers such requests, so nothing is known about the
//! log). Without idempotence a retry may write a record twice and, with
//! `max.in.flight.requests.per.connection` above 1, after a later record; failures keep their
//! truthful [`Persistence`].
//!
//! # Metrics and tracing
//!
//! [`ProducerHandle::metrics`] returns a [`Metrics`] snapshot: records accepted, delivered and
//! failed (by persistence), batches sent, retries, epoch bumps, producer ids, requests in
//! flight, buffered records and bytes against `buffer.memory`, and per partition queued
//! records, batches in flight, the last acknowledged offset and the next sequence.
//!
//! Log events go through `tracing`. Each batch's lifecycle is on the target
//! `kprod_tokio::batch`: `batch sent` (debug; `batch` id, `topic`, `partition`,
//! `base_sequence`, `records`, `bytes`, `conn`, `attempt`), `batch retry` (info; `error`),
//! `batch acknowledged` (debug; `base_offset`) and `batch failed` (debug; `error`,
//! `persisted`): follow one batch by its `batch` field, for instance with
//! `tracing_subscriber::fmt().with_env_filter(EnvFilter::from_default_env()).init()` and
//! `RUST_LOG=kprod_tokio::batch=debug`. The core reports batches only when that target is
//! enabled at debug level as the producer starts ([`ProducerConfig::batch_diagnostics`]), so
//! an untraced producer pays nothing for it.
//!
//! # Cancellation
//!
//! Dropping a [`DeliveryFuture`] (or a `send` future after its record was accepted) cancels
//! nothing: the record is delivered or fails as if the future were held, and
//! [`ProducerHandle::flush`] and [`ProducerHandle::close`] wait for it; only its outcome goes
//! unobserved. Dropping an `enqueue` or `send` future *before* the record was accepted (while
//! it waits for `buffer.memory`) means the record is never sent. A record is never half-sent:
//! it is either not accepted, or accepted and then resolved like any other.
//!
//! The two can race: the producer's task may accept a waiting record just as its future is
//! dropped (a `tokio::select!` whose other branch wins in the same turn), and then the record
//! is delivered with nobody told. Where every accepted record must report back, use
//! [`ProducerHandle::enqueue_with`] (its callback runs whatever happens to the future), or
//! do not drop a send that waits: bound it with `max.block.ms` instead. An `enqueue_many`
//! dropped part-way may likewise have had a prefix of its records accepted, their outcomes
//! unobserved.
//!
//! # Deadlines, shutdown and fatal errors
//!
//! [`ProducerHandle::flush`] and [`ProducerHandle::close`] wait until every record resolves,
//! which `delivery.timeout.ms` bounds, plus up to `max.block.ms` when sends were already
//! waiting for `buffer.memory` at the call (those go first: they are accepted, then drained,
//! rather than refused); [`ProducerHandle::flush_timeout`] and
//! [`ProducerHandle::close_timeout`] take a shorter deadline and report a [`Timeout`] without
//! cancelling anything. Dropping every handle closes the producer the same way, in the
//! background, for as long as its runtime runs: a runtime dropped first (`main` returning
//! right after its last send) drops the producer's task with it, and the records it still
//! held fail [`ErrorKind::DriverStopped`] (the ones never written not persisted, handed
//! back; a failure the core had already decided keeps its reason), without reaching the
//! broker; later records are refused with it and
//! [`ProducerHandle::fatal`] says [`Fatal::DriverStopped`]. Await [`ProducerHandle::close`]
//! before leaving `main`.
//!
//! An error that no retry can fix (CLUSTER_AUTHORIZATION_FAILED on a Produce request, failed
//! SASL authentication or a rejected certificate before any broker was reached, the gap or
//! data-loss policy set to `Fatal`) fails the producer as a whole (a topic's authorization
//! failure fails only that topic's records; a refused InitProducerId fails the records
//! waiting for a producer id, and is asked again): every
//! pending record fails with it, every later `send` and `enqueue` is refused with it, and
//! [`ProducerHandle::fatal`] returns it ([`Fatal`]).
//!
//! # Runtime
//!
//! A producer is a task on the tokio runtime it was started on (multi-threaded or not; it
//! needs the time and IO drivers, `enable_all`). On a current-thread runtime the producer,
//! its timers included, moves only while that runtime's `block_on` runs: a handle used from
//! another thread while nothing runs it waits (as every task of such a runtime does). Starting one outside a runtime returns
//! [`StartError::NoRuntime`], and on a runtime without one of those drivers
//! [`StartError::DriverDisabled`]; it never panics (tokio has no query for its drivers, so
//! the check catches the panic tokio raises without one: a program built with
//! `panic = "abort"` aborts there instead). The handle and every future it returns are
//! `Send`.
//!
//! # How it works
//!
//! One task drives the sans-IO core. It applies the inputs that are ready, one at a time (an
//! application command, bytes or a disconnect from a connection, a finished connect, or the
//! timer; up to 256 commands or 256 reads per wake-up), then drains
//! [`Producer::poll_output`] until `Wait`. Per-connection reader and writer tasks only
//! move bytes. The adapter makes no protocol decisions: it never retries, re-sends or looks
//! inside a frame.
//!
//! The core's deadlines (a batch's `linger.ms`, backoffs, timeouts) wake the driver through a
//! tokio sleep and, more precisely, through one small thread per producer (`kprod-timer`)
//! that waits on a condition variable: a tokio sleep ends about a millisecond after its
//! deadline (the runtime's millisecond tick, then the fraction of a millisecond it parked
//! at), which made every linger a millisecond longer than set. Nothing is ever woken early.
//!
//! The core sits behind a mutex shared by the driver task and the handles. `enqueue` and
//! `send` call [`Producer::send`] on the application's own task, so a record is accepted (or
//! refused) at once with no hand-off to the driver; the driver is woken only when the record
//! gave the core something to do before the deadline the driver already waits for (it opened
//! or filled a batch, or its topic needs metadata: [`Producer::wake_generation`]), and only
//! once until it drains again. A record that must wait (`buffer.memory` full, or records
//! already waiting) goes to the driver as a message and is accepted there in arrival order;
//! an [`ProducerHandle::enqueue_many`] call that had some of its records taken goes behind
//! the records that arrived meanwhile, so that waiting callers take turns as they would with
//! one record each.
//!
//! # Secured clusters
//!
//! [`ProducerHandle::from_properties`] takes `security.protocol=SSL` and the `ssl.*`
//! properties ([`ClientConfig::from_properties`]) and connects through [`TlsConnector`]
//! (rustls, feature `tls`, on by default). TLS lives entirely in the connector: the core
//! sees the same byte streams, connects and disconnects as over TCP.
//!
//! A certificate rejected by either side (the broker's chain does not lead to a trusted CA,
//! has expired, is not valid for the host; the broker refuses the client certificate or its
//! absence) is not an ordinary failed connect: the connector classifies it
//! ([`Connector::fatal_reason`]) and the adapter hands it to the core
//! ([`Producer::handle_connection_refused`]), which treats it as a refused SASL handshake.
//! Before any connection completed its handshake it is the configuration speaking: once every
//! bootstrap server has refused so or failed to connect, the producer fails at once (not at
//! `delivery.timeout.ms` with a bare timeout): every pending record resolves with
//! [`ErrorKind::Connection`] (which names the broker address, the reason and the property to
//! check), every later record is refused with it, and flush and close return. Persistence
//! stays truthful: nothing is sent before a broker answered on a connection, so those records
//! fail `NotPersisted`, each handed back ([`DeliveryError::record`]). Once the cluster was
//! reached, one broker's certificate (a broker restarted with a certificate from another CA,
//! a leader moved to a host its certificate does not name) fails only that connection, as in
//! the Java client: it is logged (`handshake failed; will retry`), the broker is tried again
//! after the reconnect backoff, and the rest of the cluster goes on serving the producer.
//! Anything else (refused, reset, a handshake cut short) stays an ordinary connection
//! failure that the core retries.
//!
//! # SASL
//!
//! `security.protocol=SASL_PLAINTEXT` or `SASL_SSL` with `sasl.mechanism` (`PLAIN`,
//! `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`), `sasl.username` and `sasl.password`
//! (feature `scram`, on by default, for SCRAM). The exchange runs in the core, on every
//! connection after ApiVersions and before any other request, and again before the session
//! lifetime the broker announces ends (KIP-368). The adapter only answers the core's
//! [`Output::SaslInput`]: a SCRAM nonce from the operating system's random generator, or an
//! OAUTHBEARER token from the application's [`TokenProvider`]
//! ([`ProducerHandle::from_properties_with_token_provider`]). Bad credentials (or a refused
//! mechanism) before any connection completed its handshake fail the producer at once, once
//! every bootstrap server has refused or failed to connect: every pending record fails with `FatalError::Authentication`,
//! `NotPersisted` (nothing is written on a connection before it is authenticated), and nothing
//! reconnects. Once a connection completed its handshake, a refusal (a re-authentication, a reconnect, a token
//! provider's failure) is an error on that connection only, logged as a warning: it is
//! closed and opened again after the reconnect backoff. The password never shows in `Debug`
//! output or in log events.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod fine_timer;
mod properties;
mod sasl;
mod security_extras;
mod slots;
#[cfg(feature = "tls")]
mod tls;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use kprod_core::{
    is_valid_topic_name, CompressionTask, ConnId, Diagnostic, Event, Output, Producer, RecordId,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::{AbortHandle, JoinError, JoinSet};
use tracing::{debug, error, info, warn};

pub use properties::{config_from_properties, ClientConfig, PropertyError, Security, TlsOptions};
pub use sasl::TokenProvider;
#[cfg(feature = "tls")]
pub use tls::TlsConnector;

// What an application needs besides the handle, so that kprod-tokio is its only dependency.
pub use bytes::Bytes;
/// The sans-IO core this crate drives, for what the flat re-exports below leave out.
pub use kprod_core;
/// A Kafka error code, as in [`FailureReason::Broker`] and [`FatalError::Broker`].
pub use kprod_core::protocol::ErrorCode;
/// Why an accepted record failed: kprod-core's `DeliveryError`, the payload of
/// [`ErrorKind::Failed`] (this crate's [`DeliveryError`] wraps it with the record's
/// [`Persistence`]).
pub use kprod_core::DeliveryError as FailureReason;
pub use kprod_core::{
    Compression, CompressionType, ConfigError, DataLossPolicy, FatalError, GapPolicy, Header,
    Metrics, PartitionMetrics, Partitioner, Persistence, ProducerConfig, Record, SaslConfig,
    SaslMechanism, Secret, SendError, TopicName,
};

/// How many application commands may wait for the driver before callers wait too.
const COMMAND_QUEUE: usize = 1024;
/// How many read chunks may wait for the driver before readers stop reading.
const IO_QUEUE: usize = 64;
/// Bytes a reader asks the socket for at once.
const READ_CHUNK: usize = 64 * 1024;
/// How long a connection's writer is busy without a break before it reports how far it got
/// ([`WriteProgress`]).
const WRITE_REPORT_EVERY: Duration = Duration::from_secs(1);

/// Opens byte streams to brokers. The seam that lets tests use in-memory streams.
pub trait Connector: Send + Sync + 'static {
    /// The stream type.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Opens a stream to `addr` (`host:port`).
    fn connect(&self, addr: &str) -> impl Future<Output = io::Result<Self::Stream>> + Send;

    /// Why `error`, returned by [`Self::connect`] or by reading or writing a stream it opened,
    /// is a configuration error that no retry of the connection can fix (a certificate
    /// rejected by either side), or `None` (the default) for an ordinary failure that the core
    /// retries. On `Some` the core is told ([`Producer::handle_connection_refused`]): before
    /// the cluster was reached, once every bootstrap server refused so, the producer fails
    /// with [`ErrorKind::Connection`]; after, only that connection fails. See the crate
    /// documentation.
    ///
    /// It is called while the driver holds the lock that every [`ProducerHandle`] call takes:
    /// it must not call the producer (an `abort()`, a send), which would wait for itself for
    /// ever. Decide, and return.
    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        let _ = error;
        None
    }

    /// Whether [`Self::connect`] needs the runtime's IO driver (`enable_io`): `true` (the
    /// default) has the producer check at start that the runtime has it, and refuse to start
    /// ([`StartError::DriverDisabled`]) rather than fail every connect. A connector that
    /// opens no sockets (in-memory streams) may say `false`.
    fn needs_io_driver(&self) -> bool {
        true
    }
}

/// The TCP socket options [`TcpConnector`] sets on each connection it opens: the
/// `socket.nagle.disable`, `socket.keepalive.enable` and socket buffer properties
/// ([`ClientConfig::socket`]). Start from [`SocketOptions::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SocketOptions {
    /// `TCP_NODELAY` (`socket.nagle.disable`): `true` by default, as in both the Java client
    /// and librdkafka: a request is written whole, at once, and Nagle's algorithm would only
    /// hold its last segment back for an acknowledgement.
    pub nodelay: bool,
    /// `SO_KEEPALIVE` (librdkafka's `socket.keepalive.enable`): `false` by default, as in
    /// librdkafka (the Java client always sets it). The operating system's keepalive timers
    /// (two hours of silence on Linux) rarely matter to a producer, whose requests time out
    /// far sooner and whose idle connections close after `connections.max.idle.ms` (except
    /// under `acks=0`, whose connections are never closed for idleness: there keepalive can
    /// find a dead peer between records).
    pub keepalive: bool,
    /// `SO_SNDBUF` in bytes (`send.buffer.bytes`, librdkafka's `socket.send.buffer.bytes`):
    /// `None` (the default) leaves it to the operating system, which on Linux grows it with
    /// the connection's needs; a value set turns that off for the connection.
    pub send_buffer: Option<u32>,
    /// `SO_RCVBUF` in bytes (`receive.buffer.bytes`, librdkafka's
    /// `socket.receive.buffer.bytes`), set before connecting so that the TCP window scale
    /// follows it: `None` (the default) leaves it to the operating system.
    pub receive_buffer: Option<u32>,
    /// Which of the addresses a broker's name resolves to are tried (librdkafka's
    /// `broker.address.family`): all of them by default.
    pub address_family: AddressFamily,
}

impl Default for SocketOptions {
    fn default() -> Self {
        Self {
            nodelay: true,
            keepalive: false,
            send_buffer: None,
            receive_buffer: None,
            address_family: AddressFamily::Any,
        }
    }
}

/// Which addresses of a broker's name [`TcpConnector`] tries ([`SocketOptions::address_family`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddressFamily {
    /// IPv4 and IPv6 (`any`, the default).
    #[default]
    Any,
    /// IPv4 only (`v4`).
    V4,
    /// IPv6 only (`v6`).
    V6,
}

impl AddressFamily {
    /// Whether an address of this family is tried.
    pub fn admits(self, addr: &std::net::SocketAddr) -> bool {
        match self {
            Self::Any => true,
            Self::V4 => addr.is_ipv4(),
            Self::V6 => addr.is_ipv6(),
        }
    }
}

/// The default connector: TCP with `TCP_NODELAY` ([`SocketOptions`] say which options). A
/// host name that resolves to several addresses has every one tried ([`connect_any_with`]),
/// as the Java client's `client.dns.lookup=use_all_dns_ips` does, and each connect to the
/// same name begins at the address after the one the previous connect began at (as the Java
/// client moves to a name's next address at each connect, and librdkafka goes round them):
/// an address that takes TCP connections but is no working broker (hung, shutting down, a
/// TLS or SASL failure on that host only) cannot hold every reconnect. Clones share that
/// rotation.
#[derive(Debug, Clone, Default)]
pub struct TcpConnector {
    options: SocketOptions,
    /// Per name (`host:port`, as given): the address the next connect begins at.
    rotation: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl TcpConnector {
    /// A connector setting `options` on each connection.
    pub fn new(options: SocketOptions) -> Self {
        Self {
            options,
            rotation: Arc::default(),
        }
    }

    /// Connects to one of `addrs`, what the name `name` resolved to ([`connect_any_with`]),
    /// beginning at the address after the one the previous connect to `name` began at.
    pub async fn connect_resolved(
        &self,
        name: &str,
        mut addrs: Vec<std::net::SocketAddr>,
    ) -> io::Result<TcpStream> {
        if addrs.len() > 1 {
            let start = {
                let mut rotation = self.rotation.lock().unwrap_or_else(|e| e.into_inner());
                // Names only come and go (brokers replaced over weeks): a long list starts
                // over rather than growing for the producer's life (a review finding).
                if rotation.len() >= 1024 && !rotation.contains_key(name) {
                    rotation.clear();
                }
                let next = rotation.entry(name.to_owned()).or_insert(0);
                let start = *next;
                *next = next.wrapping_add(1);
                start
            };
            let len = addrs.len();
            addrs.rotate_left(start % len);
        }
        connect_any_with(&addrs, self.options).await
    }

    /// The options it sets.
    pub fn options(&self) -> SocketOptions {
        self.options
    }
}

impl Connector for TcpConnector {
    type Stream = TcpStream;
    async fn connect(&self, addr: &str) -> io::Result<TcpStream> {
        let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host(addr).await?.collect();
        self.connect_resolved(addr, addrs).await
    }
}

/// How long a connection attempt to one address has before the next address is tried
/// alongside it (RFC 8305's recommended delay).
const NEXT_ADDRESS_AFTER: Duration = Duration::from_millis(250);

/// Connects to the first of `addrs` that accepts: the first is tried at once, and each next
/// one when the attempts before it have failed or 250 ms after the last one
/// started, the attempts still running going on beside it (Happy Eyeballs, RFC 8305). An
/// address that drops connection attempts (a dead host behind a name with several
/// addresses) so no longer holds the others for the kernel's SYN retries (about two minutes,
/// longer than the producer's `connect.timeout`). The error is the last attempt's. Sockets
/// get [`SocketOptions::default`].
pub async fn connect_any(addrs: &[std::net::SocketAddr]) -> io::Result<TcpStream> {
    connect_any_with(addrs, SocketOptions::default()).await
}

/// [`connect_any`] over the addresses of `options.address_family`, each attempt's socket set
/// up as `options` say before it connects.
pub async fn connect_any_with(
    addrs: &[std::net::SocketAddr],
    options: SocketOptions,
) -> io::Result<TcpStream> {
    let family = options.address_family;
    let admitted: Vec<std::net::SocketAddr> =
        addrs.iter().copied().filter(|a| family.admits(a)).collect();
    if admitted.is_empty() && !addrs.is_empty() {
        let wanted = if family == AddressFamily::V4 {
            "IPv4"
        } else {
            "IPv6"
        };
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "none of the broker's addresses {addrs:?} is an {wanted} address \
                 (broker.address.family)"
            ),
        ));
    }
    let addrs = &admitted[..];
    let mut next = addrs.iter().copied();
    let mut attempts = JoinSet::new();
    let mut last_error = None;
    let stagger = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(stagger);
    let mut more = true;
    loop {
        if more && (attempts.is_empty() || stagger.is_elapsed()) {
            match next.next() {
                Some(a) => {
                    attempts.spawn(connect_one(a, options));
                    stagger
                        .as_mut()
                        .reset(tokio::time::Instant::now() + NEXT_ADDRESS_AFTER);
                }
                None => more = false,
            }
        }
        if attempts.is_empty() {
            return Err(last_error.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address")
            }));
        }
        tokio::select! {
            done = attempts.join_next() => match done {
                Some(Ok(Ok(stream))) => return Ok(stream), // the others are aborted on drop
                Some(Ok(Err(e))) => last_error = Some(e),
                Some(Err(e)) => last_error = Some(io::Error::other(e)),
                None => {}
            },
            () = &mut stagger, if more => {}
        }
    }
}

/// Opens one TCP connection to `addr` with `options` set on its socket first.
async fn connect_one(addr: std::net::SocketAddr, options: SocketOptions) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(options.nodelay)?;
    socket.set_keepalive(options.keepalive)?;
    if let Some(n) = options.send_buffer {
        socket.set_send_buffer_size(n)?;
    }
    if let Some(n) = options.receive_buffer {
        socket.set_recv_buffer_size(n)?;
    }
    socket.connect(addr).await
}

/// A record in the log or, with `acks=0`, a record sent without any acknowledgement: check
/// [`Delivery::acknowledgement`] before relying on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset; `None` when the broker confirmed a duplicate without one or answered success
    /// at offset -1 (offset unknown), and always `None` under `acks=0`
    /// ([`Acknowledgement::Unacknowledged`]).
    pub offset: Option<i64>,
    /// The record's timestamp in the log (ms since the Unix epoch): the one it was sent with
    /// (its create time, or the wall-clock time at `enqueue` for a zero one, worked out from
    /// the monotonic clock: a step of the wall clock shows within 100 ms) or, on a topic
    /// that keeps `message.timestamp.type=LogAppendTime`, the time the broker wrote it
    /// ([`Delivery::timestamp_type`] says which).
    pub timestamp: i64,
    /// Whose time [`Delivery::timestamp`] is.
    pub timestamp_type: TimestampType,
    /// What the broker confirmed, which follows `acks`.
    pub acknowledgement: Acknowledgement,
}

/// Whose time a [`Delivery::timestamp`] is, as the topic's `message.timestamp.type` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// The record's own, as sent; also when the log's is not known: the broker did not say
    /// (a duplicate confirmed without offsets, `acks=0`), or it answered a retry of a
    /// possibly written attempt before an answer that could not be a duplicate's showed the
    /// topic stamps appends ([`kprod_core::Delivered::log_append_time`]).
    CreateTime,
    /// The broker's, when it wrote the record's batch.
    LogAppendTime,
}

impl Delivery {
    /// Whether a broker acknowledged the record (`acks` all or 1). `false` under `acks=0`:
    /// the record was only handed to the connection.
    pub fn is_acknowledged(&self) -> bool {
        self.acknowledgement != Acknowledgement::Unacknowledged
    }
}

/// What the broker confirmed about a [`Delivery`]: the durability `acks` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Acknowledgement {
    /// `acks=all` (the default): the leader and every in-sync replica wrote it
    /// (`min.insync.replicas` at least).
    InSyncReplicas,
    /// `acks=1` (idempotence off): only the leader wrote it. It is lost if the leader fails
    /// before a follower copies it, although it was reported at its offset.
    Leader,
    /// `acks=0` (idempotence off): the request was handed to the connection and the broker
    /// never answers, so nothing is known: no offset, not even that it was written (the core's
    /// [`kprod_core::Event::Sent`]). Never an offset acknowledgement.
    Unacknowledged,
}

/// A connection error that no retry can fix ([`Connector::fatal_reason`]) on every bootstrap
/// server before the cluster was reached, which failed the producer: every record pending
/// then, and every record sent afterwards, fails with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionError {
    /// The broker address (`host:port`) the connection went to.
    pub addr: Arc<str>,
    /// Why, naming the setting to check.
    pub reason: Arc<str>,
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connection to {} failed: {}; retrying cannot fix this, so the producer has failed",
            self.addr, self.reason
        )
    }
}

impl std::error::Error for ConnectionError {}

/// Why the producer failed as a whole: an error that no retry can fix. Once it happens,
/// every record pending then fails with it, every later `send` or `enqueue` is refused with
/// it, and [`ProducerHandle::fatal`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fatal {
    /// The core stopped ([`kprod_core::Event::Fatal`]): a broker error no retry can fix
    /// (CLUSTER_AUTHORIZATION_FAILED on a Produce request, say), failed SASL authentication,
    /// no common API version, or the gap or data-loss policy set to `Fatal`. Records fail with
    /// [`ErrorKind::Failed`]`(`[`FailureReason::Fatal`]`)`.
    Producer(FatalError),
    /// A connection error no retry can fix (a certificate rejected by either side) on every
    /// bootstrap server before the cluster was reached (the core's
    /// [`FatalError::Refused`]): see [`ConnectionError`]. Records fail with
    /// [`ErrorKind::Connection`].
    Connection(ConnectionError),
    /// The producer's task ended before the producer was closed: its runtime was dropped
    /// (`main` returned, a test's runtime ended), or it panicked. Records pending then fail
    /// and later ones are refused with [`ErrorKind::DriverStopped`]. (Before, later records
    /// were refused as if the application had closed the producer.)
    DriverStopped,
}

impl Fatal {
    /// The adapter's form of the core's fatal error: a refusal of every bootstrap server's
    /// connection (a certificate rejected) is a [`ConnectionError`].
    fn from_core(e: FatalError) -> Self {
        match e {
            FatalError::Refused { addr, reason } => Self::Connection(ConnectionError {
                addr: addr.into(),
                reason: reason.into(),
            }),
            e => Self::Producer(e),
        }
    }

    /// What a record failed by it is told.
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Producer(e) => ErrorKind::Failed(FailureReason::Fatal(e.clone())),
            Self::Connection(e) => ErrorKind::Connection(e.clone()),
            Self::DriverStopped => ErrorKind::DriverStopped,
        }
    }

    /// The error a record gets from this failure, with the record handed back.
    fn record_error(&self, persisted: Persistence, record: Option<Box<Record>>) -> DeliveryError {
        DeliveryError {
            kind: self.kind(),
            persisted,
            record,
            detail: None,
        }
    }
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Producer(e) => write!(f, "the producer failed: {e}"),
            Self::Connection(e) => e.fmt(f),
            Self::DriverStopped => f.write_str(
                "the producer's task stopped before the producer was closed (its runtime was \
                 dropped, or it panicked)",
            ),
        }
    }
}

impl std::error::Error for Fatal {}

/// Why a producer could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration does not validate; the error names the setting.
    Config(ConfigError),
    /// Called outside a tokio runtime: the producer runs as a task on the current runtime.
    NoRuntime,
    /// The current runtime was built without a driver the producer needs: `"time"` (its
    /// timers) or `"IO"` (sockets, for a connector that [`Connector::needs_io_driver`]).
    /// Build the runtime with `enable_all`. (Found by catching tokio's panic: under
    /// `panic = "abort"` the process aborts instead.)
    DriverDisabled(&'static str),
}

/// What [`StartError::NoRuntime`] and [`PropertyError::NoRuntime`] say.
pub(crate) const NO_RUNTIME: &str =
    "no tokio runtime: a kprod-tokio producer runs as a task on the current runtime, so start \
     it from async code run by tokio, inside Runtime::block_on, or while a Runtime::enter \
     guard is held (the runtime needs its time and IO drivers: enable_all)";

/// The reason [`ProducerHandle::abort`] gives ([`FatalError::Aborted`]).
pub const ABORTED: &str = "the application aborted it (ProducerHandle::abort)";

/// What [`StartError::DriverDisabled`] and [`PropertyError::DriverDisabled`] say.
pub(crate) fn driver_disabled(
    f: &mut std::fmt::Formatter<'_>,
    driver: &'static str,
) -> std::fmt::Result {
    write!(
        f,
        "the tokio runtime was built without its {driver} driver, which a kprod-tokio producer \
         needs: build the runtime with enable_all() (or enable_time() and enable_io())"
    )
}

/// Whether the current runtime has the drivers a producer needs: its timers, and with `io`
/// its IO driver. tokio offers no query for either, so each is tried (a timer made, a
/// socket registered) and the panic tokio raises without it caught; the panic's message is
/// still printed by the panic hook.
fn check_drivers(io: bool) -> Result<(), StartError> {
    if std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_err() {
        return Err(StartError::DriverDisabled("time"));
    }
    if io {
        // Without a socket to try (none can be bound), the connects will tell.
        let Ok(socket) = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)) else {
            return Ok(());
        };
        if socket.set_nonblocking(true).is_ok()
            && std::panic::catch_unwind(move || drop(tokio::net::UdpSocket::from_std(socket)))
                .is_err()
        {
            return Err(StartError::DriverDisabled("IO"));
        }
    }
    Ok(())
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(e) => e.fmt(f),
            Self::NoRuntime => f.write_str(NO_RUNTIME),
            Self::DriverDisabled(driver) => driver_disabled(f, driver),
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<StartError> for PropertyError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Config(e) => Self::Config(e),
            StartError::NoRuntime => Self::NoRuntime,
            StartError::DriverDisabled(driver) => Self::DriverDisabled(driver),
        }
    }
}

/// Why [`ProducerHandle::partition_count`] gives no count.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartitionCountError {
    /// Not a valid topic name.
    InvalidTopic(String),
    /// No metadata answer gave the topic's partitions within `max.block.ms` (as Java's
    /// `partitionsFor` times out). `last_error` is what the last answer said of the topic
    /// instead: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist (and is not
    /// created automatically); `None` if no answer came.
    Timeout {
        /// The topic asked about.
        topic: String,
        /// `max.block.ms`.
        after: Duration,
        /// What the last metadata answer said of the topic.
        last_error: Option<ErrorCode>,
    },
    /// The cluster refuses to describe the topic: TOPIC_AUTHORIZATION_FAILED or
    /// INVALID_TOPIC_EXCEPTION.
    Broker {
        /// The topic asked about.
        topic: String,
        /// The error the metadata answer gave.
        code: ErrorCode,
    },
    /// The producer was closed (or its driver stopped) before the count was known.
    Closed,
    /// The producer failed as a whole ([`ProducerHandle::fatal`]).
    Fatal(Fatal),
}

impl std::fmt::Display for PartitionCountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidTopic(t) => write!(f, "{t:?} is not a valid topic name"),
            Self::Timeout {
                topic,
                after,
                last_error,
            } => {
                write!(f, "topic {topic:?} not present in metadata after {after:?}")?;
                match last_error {
                    Some(code) => write!(f, " (last error: {code})"),
                    None => Ok(()),
                }
            }
            Self::Broker { topic, code } => {
                write!(f, "the cluster refuses to describe topic {topic:?}: {code}")
            }
            Self::Closed => f.write_str("the producer is closed"),
            Self::Fatal(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PartitionCountError {}

/// [`PartitionCountError`] once the producer takes no more work.
fn stopped_error(fatal: Option<&Fatal>) -> PartitionCountError {
    fatal.map_or(PartitionCountError::Closed, |f| {
        PartitionCountError::Fatal(f.clone())
    })
}

/// [`ProducerHandle::flush_timeout`] or [`ProducerHandle::close_timeout`] ran out of time.
/// Nothing was cancelled: every record accepted before still resolves, and its delivery
/// future reports how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    /// `"flush"` or `"close"`.
    pub operation: &'static str,
    /// The time allowed.
    pub after: Duration,
}

impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} did not finish within {:?}: records still unresolved keep being delivered \
             (each resolves by delivery.timeout.ms, and its delivery future says how)",
            self.operation, self.after
        )
    }
}

impl std::error::Error for Timeout {}

/// Why a record was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The producer refused the record before accepting it; the record is handed back.
    /// `QueueFull` only once the caller has waited `max.block.ms` for room: a full buffer
    /// makes the caller wait first.
    Refused(Box<SendError>),
    /// The record failed (or, after the producer failed, was refused) for this reason.
    Failed(FailureReason),
    /// The producer failed on a connection error that no retry can fix (a certificate
    /// rejected by either side): see [`ConnectionError`].
    Connection(ConnectionError),
    /// The driver task vanished (runtime shut down or a panic) before the record resolved.
    DriverStopped,
}

/// A record's failure, with whether it may be in the log anyway, and the record itself
/// ([`Self::record`], [`Self::into_record`]) so that the application can send it again,
/// re-route it or persist it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryError {
    /// Why.
    pub kind: ErrorKind,
    /// Whether the record may be in the log.
    pub persisted: Persistence,
    /// The record handed back (for `Refused`, it is inside the `SendError`).
    record: Option<Box<Record>>,
    /// What the broker said beyond its error code.
    detail: Option<Box<kprod_core::BrokerDetail>>,
}

impl DeliveryError {
    /// An error without a record (for tests of application code; the producer's errors
    /// carry theirs).
    pub fn new(kind: ErrorKind, persisted: Persistence) -> Self {
        Self {
            kind,
            persisted,
            record: None,
            detail: None,
        }
    }

    /// What the broker said beyond its error code when it refused the record's batch
    /// (Produce v8+): its message and whether it named this record as invalid
    /// ([`kprod_core::BrokerDetail`]). A broker refusing a batch for a keyless record on a
    /// compacted topic, or for an out-of-range timestamp, names the culprits: the batch's
    /// other records were refused only for being with them, and may be sent again.
    pub fn broker_detail(&self) -> Option<&kprod_core::BrokerDetail> {
        self.detail.as_deref()
    }

    /// The record that failed: topic, key, value, headers and timestamp as sent (a zero
    /// timestamp was set to the wall-clock time at `enqueue`). Its `partition` is the one it
    /// was assigned once it had one, so sending it again as it is keeps it there; set it to
    /// `None` to let the partitioner choose anew.
    ///
    /// `Some` for every failure but [`ErrorKind::DriverStopped`] after the driver task
    /// panicked (the record was lost with it; a driver dropped with its runtime hands back
    /// every record it held, each with its own persistence): refused records ([`ErrorKind::Refused`], and every record refused
    /// after the producer failed), records that failed in the producer
    /// ([`ErrorKind::Failed`], including the fatal path) and records failed by a
    /// connection error ([`ErrorKind::Connection`]). The producer keeps no copy of a record
    /// in a sealed batch: it decodes the batch's bytes back when the record fails.
    pub fn record(&self) -> Option<&Record> {
        match &self.kind {
            ErrorKind::Refused(e) => Some(e.record()),
            _ => self.record.as_deref(),
        }
    }

    /// The record that failed, by value ([`Self::record`]).
    pub fn into_record(self) -> Option<Record> {
        match self.kind {
            ErrorKind::Refused(e) => Some(e.into_record()),
            _ => self.record.map(|r| *r),
        }
    }
}

impl std::fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ErrorKind::Refused(e) => write!(f, "record refused: {e}")?,
            ErrorKind::Failed(e) => self.write_failed(f, e)?,
            ErrorKind::Connection(e) => self.write_failed(f, e)?,
            ErrorKind::DriverStopped => write!(
                f,
                "the producer's driver task stopped ({:?}; its runtime shut down, or it \
                 panicked: await close() before the runtime ends)",
                self.persisted
            )?,
        }
        match &self.detail {
            Some(d) => write!(f, " ({d})"),
            None => Ok(()),
        }
    }
}

impl DeliveryError {
    /// "delivery failed", the persistence, where the record was going (as Kafka names a
    /// partition, `topic-partition`) and `cause`.
    fn write_failed(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        cause: &dyn std::fmt::Display,
    ) -> std::fmt::Result {
        write!(f, "delivery failed ({:?})", self.persisted)?;
        if let Some(r) = &self.record {
            write!(f, " to {}", r.topic)?;
            if let Some(p) = r.partition {
                write!(f, "-{p}")?;
            }
        }
        write!(f, ": {cause}")
    }
}

impl std::error::Error for DeliveryError {}

/// Topic, partition, offset, log append time, acknowledgement.
type Outcome = Result<(Arc<str>, i32, Option<i64>, Option<i64>, Acknowledgement), DeliveryError>;

/// What the driver holds for each accepted record until it resolves, charged against
/// `buffer.memory` with the record ([`ProducerConfig::record_overhead`]): its place in
/// [`Pending`] and its outcome's slot, with its share of the slab the slot is in
/// (`slots.rs`). Without it a `buffer.memory` of 1 MiB held about 36,500 records of 8
/// bytes and 10 MiB of memory (review finding).
const RECORD_OVERHEAD: usize = size_of::<Option<Done>>() + slots::SHARE;

// 32 bytes of handler and 45 of slab on 64-bit Linux (the README says 77).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
const _: () = assert!(RECORD_OVERHEAD == 77);

/// The outcome of an accepted record. Dropping it does not cancel the record: the record is
/// delivered (or fails) as if the future were still held, [`ProducerHandle::flush`] and
/// [`ProducerHandle::close`] still wait for it; only its outcome goes unobserved.
///
/// Polling it again after it returned its outcome panics, as for other one-shot futures.
pub struct DeliveryFuture {
    /// Its slot; dropped before the outcome was taken, it lets the slot go.
    slot: slots::Bound,
    timestamp: i64,
    /// The waker it stored in its slot last.
    stored: Option<slots::WakerId>,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("timestamp", &self.timestamp)
            .field("taken", &self.slot.taken)
            .finish_non_exhaustive()
    }
}

impl DeliveryFuture {
    fn new(slot: slots::Bound, timestamp: i64) -> Self {
        Self {
            slot,
            timestamp,
            stored: None,
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<Delivery, DeliveryError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(
            !self.slot.taken,
            "DeliveryFuture polled after it returned its outcome"
        );
        let this = &mut *self;
        let slots::Bound { slab, idx, .. } = &this.slot;
        match slab.poll(*idx, this.timestamp, cx.waker(), &mut this.stored) {
            Some(outcome) => {
                this.slot.taken = true;
                Poll::Ready(outcome)
            }
            None => Poll::Pending,
        }
    }
}

/// What the application learns of an outcome, for a record created at `timestamp`.
fn delivery(outcome: Outcome, timestamp: i64) -> Result<Delivery, DeliveryError> {
    let (topic, partition, offset, log_append_time, acknowledgement) = outcome?;
    let (timestamp, timestamp_type) = match log_append_time {
        Some(t) => (t, TimestampType::LogAppendTime),
        None => (timestamp, TimestampType::CreateTime),
    };
    Ok(Delivery {
        topic,
        partition,
        offset,
        timestamp,
        timestamp_type,
        acknowledgement,
    })
}

/// A record's outcome handler for [`ProducerHandle::enqueue_with`].
type OnDelivery = Box<dyn FnOnce(Result<Delivery, DeliveryError>) + Send>;

/// Where an accepted record's outcome goes: its [`DeliveryFuture`]'s slot (found by the
/// record's id, `slots.rs`), or the application's callback. Either way exactly once: the
/// producer's task closes the slots when it stops (a future still waiting then says
/// "stopped"), and a callback dropped without an outcome is called with "stopped".
#[derive(Debug)]
enum Done {
    Future,
    Callback(Callback),
}

/// [`Done::Callback`]: the callback and its record's timestamp, negative until the record
/// is accepted (a record's timestamp never is): only then is it armed, so a record refused
/// (the caller gets the error, the record inside it) never calls it. Kept to three words:
/// every pending record holds a `Done`.
struct Callback {
    f: OnDelivery,
    timestamp: i64,
}

impl Callback {
    const UNARMED: i64 = -1;

    fn new(f: OnDelivery) -> Self {
        Self {
            f,
            timestamp: Self::UNARMED,
        }
    }

    /// Calls the callback with `result` and disarms it. A panic in it is caught (the panic
    /// hook has reported it): it must not take the producer's task, and every other
    /// record's outcome, down with it.
    fn call(&mut self, result: Result<Delivery, DeliveryError>) {
        self.timestamp = Self::UNARMED;
        // A closure capturing nothing: boxing it allocates nothing.
        let f = std::mem::replace(&mut self.f, Box::new(|_| {}));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(result)));
    }
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("timestamp", &self.timestamp)
            .finish_non_exhaustive()
    }
}

impl Drop for Callback {
    fn drop(&mut self) {
        if self.timestamp >= 0 {
            self.call(Err(stopped()));
        }
    }
}

impl Callback {
    /// Hands `outcome` over: never under [`Shared::core`]'s lock, since a callback may use
    /// the producer.
    fn complete(mut self, outcome: Outcome) {
        let result = delivery(outcome, self.timestamp);
        self.call(result);
    }
}

impl Done {
    /// The record was accepted with this timestamp: from now on the outcome is owed.
    fn arm(&mut self, timestamp: i64) {
        if let Self::Callback(c) = self {
            debug_assert!(timestamp >= 0, "an accepted record's timestamp");
            c.timestamp = timestamp;
        }
    }
}

/// What the driver task and the handles share: the core itself, behind a mutex, so that a
/// record is accepted on the application's task with no hand-off (see [`ProducerHandle::enqueue`]).
struct Shared {
    core: Mutex<Core>,
    /// Wakes the driver when a record accepted outside it gave the core something to do before
    /// the deadline the driver waits for ([`Producer::wake_generation`]).
    wake: Notify,
    /// Records that go through the driver (commands `Send` and `SendMany` not yet applied or
    /// dropped: see [`Ticket`]). While there are any, new records go the same way, behind
    /// them, so that records waiting for `buffer.memory` keep their order.
    waiting: AtomicUsize,
    /// Record timestamps from the monotonic clock read each enqueue makes anyway.
    wall: WallClock,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while the lock was held left the core as it was then: keep using it.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The state behind [`Shared::core`].
struct Core {
    producer: Producer,
    /// Accepted records by id, until their final event.
    pending: Pending,
    /// The driver was woken and has not drained since: no need to wake it again.
    notified: bool,
    /// Records must go through the driver: the acks=0 write backlog is over its bound.
    backlogged: bool,
    /// The driver task is gone: records are refused.
    stopped: bool,
    /// [`ProducerHandle::close`] was called while sends waited for memory: those go first,
    /// and the driver closes the core behind them, but a record enqueued from now on is
    /// refused `Closed` at once (it was accepted and delivered, the close waiting for it).
    close_pending: bool,
    /// The slots of the outcomes that [`DeliveryFuture`]s wait for.
    slabs: slots::Slabs,
}

impl Core {
    /// Offers `record` to the core: the one place a `Producer::send` result becomes a verdict,
    /// for the handles' direct path and the driver alike.
    fn offer(&mut self, fatal: Option<&Fatal>, at: Instant, record: Record, done: Done) -> Verdict {
        // The slabs kept for a few unresolved records count against `buffer.memory` beyond
        // their records' charges (`Slabs::uncharged`).
        self.producer.set_external_memory(self.slabs.uncharged());
        let timestamp = record.timestamp;
        match self.producer.send(at, record) {
            Ok(id) => {
                let mut done = done;
                done.arm(timestamp);
                let slot = matches!(done, Done::Future).then(|| self.slabs.bind(id.0));
                self.pending.insert(id, done);
                Verdict::Accepted(slot)
            }
            Err(SendError::QueueFull(record)) => Verdict::Full(record, done),
            Err(e) => Verdict::Refused(refusal(fatal, e)),
        }
    }
}

/// What the core made of an offered record.
enum Verdict {
    /// Accepted; its completion waits in `pending`, and a future's outcome in this slot.
    Accepted(Option<slots::Bound>),
    /// The buffer is full: the record and its completion are handed back to wait.
    Full(Record, Done),
    /// Refused for good, the record inside the error.
    Refused(DeliveryError),
}

/// The senders of accepted records' outcomes, by record id. The core hands ids out
/// consecutively and every accepted record is inserted at once, so this is a deque from the
/// lowest unresolved id (a `BTreeMap` cost a few hundred instructions per record).
///
/// A few records left unresolved at the front (a partition without a leader, say, for up to
/// `delivery.timeout.ms`) while later ones resolve would keep a slot for every later id:
/// 24 million at 200,000 records/s for 120 s. So once fewer than a quarter of at least
/// 1,024 slots are unresolved, the front's unresolved senders move to `stragglers` and the
/// resolved slots behind them are dropped.
#[derive(Default)]
struct Pending {
    /// The id of `slots[0]`.
    base: u64,
    /// `None` for a resolved record behind an unresolved one; never `None` at the front.
    slots: VecDeque<Option<Done>>,
    /// How many of `slots` are `Some`.
    dense: usize,
    /// Unresolved senders moved out of the front of `slots`: every id here is below `base`.
    stragglers: BTreeMap<u64, Done>,
}

impl Pending {
    /// Slots kept however sparse: compaction only pays off beyond this.
    const COMPACT_FROM: usize = 1024;

    /// Holds `done` until `id` resolves. Never drops it (it is called under the core's lock,
    /// and a callback dropped armed would be called there): ids are new and only grow, so
    /// the other branches are unreachable, but they keep `done` too.
    fn insert(&mut self, id: RecordId, done: Done) {
        if self.slots.is_empty() {
            self.base = id.0;
        }
        let Some(at) = id.0.checked_sub(self.base) else {
            debug_assert!(false, "record ids only grow");
            self.stragglers.insert(id.0, done);
            return;
        };
        // Ids are consecutive; a gap would only hold `None`s.
        while (self.slots.len() as u64) < at {
            self.slots.push_back(None);
        }
        match self.slots.get_mut(at as usize) {
            None => {
                self.slots.push_back(Some(done));
                self.dense += 1;
            }
            Some(slot) => {
                debug_assert!(slot.is_none(), "record ids are new");
                if slot.replace(done).is_none() {
                    self.dense += 1;
                }
            }
        }
    }

    /// Every unresolved outcome handler, lowest id first (the stragglers are all below
    /// `base`): the order in which a stopped producer reports them, so that a partition's
    /// records still come in send order.
    fn into_ordered(self) -> impl Iterator<Item = (u64, Done)> {
        let Self {
            base,
            slots,
            stragglers,
            ..
        } = self;
        let slots = (slots.into_iter().enumerate())
            .filter_map(move |(k, done)| done.map(|d| (base + k as u64, d)));
        stragglers.into_iter().chain(slots)
    }

    fn remove(&mut self, id: RecordId) -> Option<Done> {
        if id.0 < self.base {
            return self.stragglers.remove(&id.0);
        }
        let at = usize::try_from(id.0 - self.base).ok()?;
        let tx = self.slots.get_mut(at)?.take()?;
        self.dense -= 1;
        self.pop_resolved();
        if self.slots.len() >= Self::COMPACT_FROM && self.dense * 4 < self.slots.len() {
            self.compact();
        } else {
            self.give_back_room();
        }
        Some(tx)
    }

    /// Gives back the room of a peak resolved in order (dense slots, which `compact` leaves
    /// alone): a burst of a million pending records kept 32 MiB of slots for the producer's
    /// life, outside `buffer.memory` (a review finding). Shrinks to twice what is held once
    /// the room passes four times it, so the copies are paid for by the removals between them.
    fn give_back_room(&mut self) {
        let keep = 2 * self.slots.len().max(Self::COMPACT_FROM);
        if self.slots.capacity() > 2 * keep {
            self.slots.shrink_to(keep);
        }
    }

    fn pop_resolved(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Moves the front's unresolved senders aside until the slots are dense again (or few),
    /// and gives back the room a peak left behind.
    fn compact(&mut self) {
        while self.slots.len() >= Self::COMPACT_FROM / 2 && self.dense * 2 < self.slots.len() {
            if let Some(Some(tx)) = self.slots.pop_front() {
                self.stragglers.insert(self.base, tx);
                self.dense -= 1;
            }
            self.base += 1;
            self.pop_resolved();
        }
        self.give_back_room();
    }

    /// The lowest unresolved id.
    fn first(&self) -> Option<RecordId> {
        (self.stragglers.keys().next().copied())
            .or((!self.slots.is_empty()).then_some(self.base))
            .map(RecordId)
    }

    fn is_empty(&self) -> bool {
        self.dense == 0 && self.stragglers.is_empty()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.dense + self.stragglers.len()
    }
}

/// Wakes the producer's task if a send waiting for its verdict is given up by its caller:
/// the task then drops the abandoned command and tries the sends queued behind it. (Without
/// the wake, sends behind a first one given up slept with room free until something else
/// woke the task, an acknowledgement or a request timeout, or were refused `QueueFull` at
/// the abandoned one's `max.block.ms`; a review finding.)
struct WakeIfAbandoned<'a>(Option<&'a Shared>);

impl<'a> WakeIfAbandoned<'a> {
    fn new(shared: &'a Shared) -> Self {
        Self(Some(shared))
    }

    /// The verdict came: nothing to wake.
    fn disarm(mut self) {
        self.0 = None;
    }

    /// Awaits `f`, waking the producer's task if it is dropped first.
    async fn around<F: Future>(self, f: F) -> F::Output {
        let out = f.await;
        self.disarm();
        out
    }
}

impl Drop for WakeIfAbandoned<'_> {
    fn drop(&mut self) {
        if let Some(shared) = self.0 {
            shared.wake.notify_one();
        }
    }
}

/// Counts one command in [`Shared::waiting`] from its creation until it is dropped (applied,
/// refused, or given up by its caller).
#[derive(Debug)]
struct Ticket(Arc<Shared>);

impl Ticket {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(shared))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // The last one: a close that waited behind the waiting sends is the driver's to
        // apply (`Core::close_pending`), also when their callers gave up and nothing else
        // would wake it (the review of the change).
        if self.0.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.wake.notify_one();
        }
    }
}

/// Records [`ProducerHandle::accept_many`] offers the core under one hold of the lock.
const MANY_PER_LOCK: usize = 1024;

/// How far [`ProducerHandle::accept_many`] got.
enum Many {
    /// Every record accepted or refused.
    Done,
    /// One must wait for room (or records wait before them): the rest go to the driver,
    /// counted as waiting by the ticket.
    Wait(Ticket),
    /// [`MANY_PER_LOCK`] records offered: the rest after the lock was let go a moment.
    Paused,
}

/// What [`ProducerHandle::try_accept`] did with a record.
enum Accept {
    /// Accepted, with the record's timestamp (and a future's slot).
    Accepted(i64, Option<slots::Bound>),
    Refused(DeliveryError),
    /// Not accepted now (a full buffer, records waiting before it, a write backlog): it goes
    /// to the driver, which accepts it in order once there is room.
    Wait(Record, Done, Ticket),
}

/// A record's verdict on the way back to its sender: accepted (with its future's slot), or
/// why not.
type Verdicts = Result<Option<slots::Bound>, DeliveryError>;

enum Command {
    Send {
        record: Record,
        accepted: oneshot::Sender<Result<Option<slots::Bound>, DeliveryError>>,
        done: Done,
        /// When the application handed the record over: it waits for `buffer.memory` until
        /// `max.block.ms` after this, then is refused.
        since: Instant,
        _ticket: Ticket,
    },
    /// Several records in one hand-off ([`ProducerHandle::enqueue_many`]): accepted in order;
    /// a record refused for lack of memory waits (with those behind it) as a `Send` would.
    SendMany {
        records: VecDeque<(Record, Done)>,
        /// The verdicts so far, one per record taken from the front of `records`.
        results: Vec<Verdicts>,
        accepted: oneshot::Sender<Vec<Verdicts>>,
        /// When the application handed the records over, or when one of them was last
        /// accepted: the rest wait until `max.block.ms` after this (a wait per record taken,
        /// as for records handed over one by one, not one for the whole call).
        since: Instant,
        _ticket: Ticket,
    },
    Flush(oneshot::Sender<()>),
    Close(Option<oneshot::Sender<()>>),
    Metrics(oneshot::Sender<Metrics>),
    /// [`ProducerHandle::partition_count`]: answered once metadata gives the count, or at
    /// `max.block.ms` after `since`.
    PartitionCount {
        topic: String,
        since: Instant,
        tx: oneshot::Sender<Result<usize, PartitionCountError>>,
    },
}

impl Command {
    /// A send (one record or several), as opposed to a flush, close or query.
    fn is_send(&self) -> bool {
        matches!(self, Self::Send { .. } | Self::SendMany { .. })
    }

    /// When a send waiting for memory is refused (`max.block.ms` after it was handed over).
    fn expiry(&self, max_block: Duration) -> Option<Instant> {
        match self {
            Self::Send { since, .. } | Self::SendMany { since, .. } => since.checked_add(max_block),
            Self::Flush(_) | Self::Close(_) | Self::Metrics(_) | Self::PartitionCount { .. } => {
                None
            }
        }
    }

    /// How many of its records wait.
    fn waiting(&self) -> usize {
        match self {
            Self::Send { .. } => 1,
            Self::SendMany { records, .. } => records.len(),
            Self::Flush(_) | Self::Close(_) | Self::Metrics(_) | Self::PartitionCount { .. } => 0,
        }
    }

    /// A send whose caller no longer waits for its acceptance.
    fn abandoned(&self) -> bool {
        match self {
            Self::Send { accepted, .. } => accepted.is_closed(),
            Self::SendMany { accepted, .. } => accepted.is_closed(),
            Self::Flush(_) | Self::Close(_) | Self::Metrics(_) | Self::PartitionCount { .. } => {
                false
            }
        }
    }
}

/// Gives back the room a burst left in a list emptied at every hand-over: an outage's
/// delivery timeouts fail every buffered record within a few drains, one outcome each, and
/// the list kept room for all of them (tens of megabytes outside `buffer.memory`) for the
/// producer's life (a review finding). The room follows `peak`, a peak of the lengths
/// handed over (`used` this time) halved `halvings` times (once a second), so a steady load
/// keeps the room it uses, however its hand-overs alternate between large and empty ones.
/// (The core's output queue does the same.)
fn trim<T>(list: &mut Vec<T>, peak: &mut usize, halvings: u32, used: usize) {
    /// Room always kept.
    const KEEP: usize = 256;
    *peak = (*peak >> halvings).max(used);
    let keep = (*peak).max(KEEP);
    if list.capacity() > 4 * keep {
        list.shrink_to(keep);
    }
}

/// The length of the queue of commands waiting for memory at which abandoned sends are first
/// purged (then whenever it doubles).
const DEFERRED_PURGE_FROM: usize = 64;

/// Commands (and reads) the driver takes per wake-up before it drains the core once.
const MAX_PER_WAKEUP: usize = 256;

/// How long timeouts wait after the driver was woken that much later than its deadline, for
/// the answers that arrived meanwhile to be read (`ProducerConfig::late_wake_grace`): a
/// stall of a second is no scheduling jitter, and a second is ample for the readers to run.
const LATE_WAKE_GRACE: Duration = Duration::from_secs(1);

/// A cloneable handle to a producer driven by a tokio task. When every handle is dropped the
/// producer closes: buffered records are still delivered while its runtime runs (see the
/// crate documentation: await [`Self::close`] before the runtime ends).
///
/// `ProducerHandle` is `Send + Sync`, and so are the futures of its methods: share it between
/// tasks by cloning it.
#[derive(Debug, Clone)]
pub struct ProducerHandle {
    tx: mpsc::Sender<Command>,
    shared: Arc<Shared>,
    /// Set once, by the driver, when the producer fails as a whole.
    fatal: Arc<OnceLock<Fatal>>,
    /// Set once, by the driver, as it stops: the last metrics.
    final_metrics: Arc<OnceLock<Metrics>>,
    /// The runtime the driver runs on: the timers of [`Self::flush_timeout`] and
    /// [`Self::close_timeout`] are set on it when they are called outside a runtime.
    runtime: tokio::runtime::Handle,
}

impl ProducerHandle {
    /// Starts a producer that connects over TCP, on the current tokio runtime.
    ///
    /// # Errors
    /// [`StartError::Config`] names the setting that does not validate;
    /// [`StartError::NoRuntime`] when called outside a tokio runtime (this never panics);
    /// [`StartError::DriverDisabled`] when the runtime lacks its time or IO driver.
    pub fn connect(config: ProducerConfig) -> Result<Self, StartError> {
        Self::with_connector(config, TcpConnector::default())
    }

    /// Starts a producer from Kafka properties ([`ClientConfig::from_properties`]): plain TCP
    /// or, with `security.protocol=SSL`, TLS through [`TlsConnector`] (whose files are read
    /// now), on the current tokio runtime.
    ///
    /// # Errors
    /// A property that does not parse or validate, or a certificate or key file that cannot
    /// be used, each naming the property.
    pub fn from_properties(props: &[(&str, &str)]) -> Result<Self, PropertyError> {
        Self::from_config(ClientConfig::from_properties(props)?)
    }

    /// Starts a producer as `config` says (see [`Self::from_properties`]).
    ///
    /// # Errors
    /// As [`Self::from_properties`].
    pub fn from_config(config: ClientConfig) -> Result<Self, PropertyError> {
        Self::from_config_inner(config, None)
    }

    /// [`Self::from_properties`] for `sasl.mechanism=OAUTHBEARER`: tokens come from
    /// `provider`, asked each time a connection authenticates or re-authenticates.
    ///
    /// # Errors
    /// As [`Self::from_properties`].
    pub fn from_properties_with_token_provider(
        props: &[(&str, &str)],
        provider: impl TokenProvider,
    ) -> Result<Self, PropertyError> {
        Self::from_config_with_token_provider(ClientConfig::from_properties(props)?, provider)
    }

    /// [`Self::from_config`] with an OAUTHBEARER token provider.
    ///
    /// # Errors
    /// As [`Self::from_properties`].
    pub fn from_config_with_token_provider(
        config: ClientConfig,
        provider: impl TokenProvider,
    ) -> Result<Self, PropertyError> {
        Self::from_config_inner(config, Some(Arc::new(provider)))
    }

    fn from_config_inner(
        config: ClientConfig,
        provider: Option<Arc<dyn TokenProvider>>,
    ) -> Result<Self, PropertyError> {
        let oauth = config
            .producer
            .sasl
            .as_ref()
            .is_some_and(|s| s.mechanism == SaslMechanism::OAuthBearer);
        if oauth && provider.is_none() {
            return Err(PropertyError::Unsupported {
                property: "sasl.mechanism".to_owned(),
                value: "OAUTHBEARER".to_owned(),
                reason: "OAUTHBEARER tokens come from the application's token provider: use \
                         ProducerHandle::from_properties_with_token_provider",
            });
        }
        let timeout = config.connect_timeout;
        let tcp = TcpConnector::new(config.socket);
        match config.security {
            Security::Plaintext => {
                Self::start(config.producer, tcp, provider, timeout).map_err(Into::into)
            }
            #[cfg(feature = "tls")]
            Security::Ssl(tls) => {
                // A bootstrap server whose host cannot be a TLS server name is configuration
                // (a broker that metadata names so is only a connect that fails).
                let bootstrap = &config.producer.bootstrap_servers;
                if let Some(addr) = bootstrap.iter().find(|a| tls::server_name(a).is_err()) {
                    return Err(PropertyError::Invalid {
                        property: "bootstrap.servers".to_owned(),
                        value: addr.to_string(),
                        expected: "hosts that can be TLS server names (a DNS name or an IP \
                                   address) under security.protocol SSL or SASL_SSL",
                    });
                }
                let connector = TlsConnector::new(&tls)?.with_socket_options(config.socket);
                Self::start(config.producer, connector, provider, timeout).map_err(Into::into)
            }
            #[cfg(not(feature = "tls"))]
            Security::Ssl(_) => Err(PropertyError::Unsupported {
                property: "security.protocol".to_owned(),
                value: "SSL".to_owned(),
                reason: "kprod-tokio was built without its `tls` feature",
            }),
        }
    }

    /// Starts a producer that opens connections with `connector`, on the current runtime.
    ///
    /// # Errors
    /// As [`Self::connect`].
    pub fn with_connector<C: Connector>(
        config: ProducerConfig,
        connector: C,
    ) -> Result<Self, StartError> {
        Self::with_connector_and_token_provider(config, connector, None)
    }

    /// [`Self::with_connector`] with the OAUTHBEARER token provider (`None`: a producer
    /// configured for OAUTHBEARER fails at its first connection, saying it has none).
    ///
    /// # Errors
    /// As [`Self::connect`].
    pub fn with_connector_and_token_provider<C: Connector>(
        config: ProducerConfig,
        connector: C,
        token_provider: Option<Arc<dyn TokenProvider>>,
    ) -> Result<Self, StartError> {
        Self::start(config, connector, token_provider, None)
    }

    /// Starts the driver task. `connect_timeout` (`socket.connection.setup.timeout.ms`), if
    /// given, overrides [`ProducerConfig::connect_timeout`]: the core times connects out.
    fn start<C: Connector>(
        mut config: ProducerConfig,
        connector: C,
        token_provider: Option<Arc<dyn TokenProvider>>,
        connect_timeout: Option<Duration>,
    ) -> Result<Self, StartError> {
        if let Some(t) = connect_timeout {
            config.connect_timeout = t;
        }
        // The core reports each batch's lifecycle only when someone will see it.
        if tracing::enabled!(target: "kprod_tokio::batch", tracing::Level::DEBUG) {
            config.batch_diagnostics = true;
        }
        // What this driver holds per pending record is charged against `buffer.memory` too.
        config.record_overhead = config.record_overhead.max(RECORD_OVERHEAD);
        // The writers report how far they got on a slow link (`WriteProgress`).
        config.write_reports = true;
        // A driver woken late (the process stopped, the runtime's thread blocked) reads the
        // answers that arrived meanwhile before it times anything out.
        config.late_wake_grace = config.late_wake_grace.or(Some(LATE_WAKE_GRACE));
        let producer = Producer::new(config, now())?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        check_drivers(connector.needs_io_driver())?;
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                producer,
                pending: Pending::default(),
                notified: false,
                backlogged: false,
                stopped: false,
                close_pending: false,
                slabs: slots::Slabs::default(),
            }),
            wake: Notify::new(),
            waiting: AtomicUsize::new(0),
            wall: WallClock::new(now()),
        });
        let fatal = Arc::new(OnceLock::new());
        let final_metrics = Arc::new(OnceLock::new());
        let (tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (io_tx, io_rx) = mpsc::channel(IO_QUEUE);
        let driver = Driver {
            shared: Arc::clone(&shared),
            clock_watch: ClockWatch::new(),
            connector: Arc::new(connector),
            conns: HashMap::new(),
            connecting: JoinSet::new(),
            io_tx,
            outbox: Vec::new(),
            to_wake: Vec::new(),
            to_log: Vec::new(),
            handed_over_peaks: ([0; 3], None),
            deferred: VecDeque::new(),
            deferred_purge_at: DEFERRED_PURGE_FROM,
            metrics_snapshot: None,
            deferred_barriers: 0,
            refused_at: None,
            paused_many: false,
            flushes: Vec::new(),
            closers: Vec::new(),
            close_requested: false,
            deadline: None,
            token_provider,
            fatal: fatal.clone(),
            finishing: Vec::new(),
            draining: Vec::new(),
            final_metrics: final_metrics.clone(),
            write_backlog_limit: None,
            write_stall: None,
            written: Arc::new(Notify::new()),
            commands,
            partition_waiters: Vec::new(),
        };
        runtime.spawn(driver.run(io_rx));
        Ok(Self {
            tx,
            shared,
            fatal,
            final_metrics,
            runtime,
        })
    }

    /// Why the producer failed as a whole, once it has ([`Fatal`]); `None` while it works.
    /// After a failure every pending record has failed with it and every later `send` or
    /// `enqueue` is refused with it, so an application may check this instead of inspecting
    /// each record's error. Set before the failed records' futures resolve.
    pub fn fatal(&self) -> Option<Fatal> {
        self.fatal.get().cloned()
    }

    /// A snapshot of the producer's counters (records accepted, delivered, failed by persistence,
    /// batches sent, retries, epoch bumps, producer ids) and gauges (requests in flight,
    /// buffered records and bytes against `buffer.memory`, per partition: queued records,
    /// batches in flight, last acknowledged offset, next sequence): kprod-core's
    /// [`Metrics`], each field documented there. Answered by the driver task between two
    /// inputs (it waits behind commands queued before it); once the driver has stopped, the
    /// metrics it had then.
    pub async fn metrics(&self) -> Metrics {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Metrics(tx)).await.is_ok() {
            if let Ok(m) = rx.await {
                return m;
            }
        }
        self.final_metrics.get().cloned().unwrap_or_default()
    }

    /// Hands a record to the producer and returns once it is accepted, without waiting for
    /// delivery. While `buffer.memory` is full (or `queue.buffering.max.messages` records
    /// are held, [`ProducerConfig::max_buffered_records`]) this waits for records to resolve (behind the
    /// records already waiting, in order), for at most `max.block.ms` (60 s by default) from
    /// the call, as the Java client's `send` blocks: then the record is refused,
    /// `Refused(QueueFull)`, not persisted, and handed back. A zero timestamp is set to the
    /// current wall-clock time.
    ///
    /// When there is room the record is accepted on the caller's task at the first poll,
    /// without waiting for the producer's task (a short lock shared with it). Like tokio's own
    /// channels, it first spends the task's cooperative budget, so a loop of enqueues yields
    /// to other tasks now and then (and to the producer's task on a single-threaded runtime);
    /// a poll that yields there has accepted nothing.
    ///
    /// Cancellation: if this future is dropped before it returns, the record is either never
    /// accepted (then it is not sent at all: that is the case while it waits for memory, and
    /// whenever a poll with room returned `Pending`) or, when it waited, accepted by the
    /// producer's task a moment before, and then it is delivered like any other record
    /// (`flush` and `close` wait for it). Either way it is never half-sent; to learn which, await the
    /// future. Dropping the returned [`DeliveryFuture`] cancels nothing.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`]: an invalid topic name or partition, a negative timestamp, too
    /// large, the producer closed, or `QueueFull` after `max.block.ms` without room; once
    /// the producer has failed, the [`Fatal`] error ([`ErrorKind::Failed`] with
    /// [`FailureReason::Fatal`], or [`ErrorKind::Connection`]); [`ErrorKind::DriverStopped`]
    /// (not persisted, without its record) if the producer's task died before answering.
    /// Every other refusal hands the record back.
    pub async fn enqueue(&self, record: Record) -> Result<DeliveryFuture, DeliveryError> {
        match self.accept(record, Done::Future).await? {
            (timestamp, Some(slot)) => Ok(DeliveryFuture::new(slot, timestamp)),
            (_, None) => unreachable!("a future's record is bound to a slot"),
        }
    }

    /// [`Self::enqueue`] with a callback instead of a [`DeliveryFuture`]: once the record is
    /// accepted, `on_delivery` is called exactly once with its outcome, the same
    /// `Result` the future would give (also when the producer's task stops before an
    /// outcome: then `ErrorKind::DriverStopped`), as the Java producer's `Callback`. A record
    /// refused here (the `Err`, with the record inside) never calls it.
    ///
    /// It runs on the producer's task, outside the producer's lock, one outcome after
    /// another in the order the producer learns them, a partition's records in the order
    /// they were accepted (the core holds a later batch's outcome while an earlier batch of
    /// its partition is retried, e.g. after NOT_ENOUGH_REPLICAS_AFTER_APPEND): keep it short and non-blocking (count, store, or hand the
    /// outcome to a channel), since the producer does nothing else meanwhile. A panic in it
    /// is caught and ignored (the panic hook reports it as usual). If the producer's task
    /// ends before a record's outcome (its runtime shut down), the callback is called with
    /// `ErrorKind::DriverStopped` wherever that task is dropped, lowest record first. A
    /// callback that holds a [`ProducerHandle`] (to send a follow-up, say) keeps the
    /// producer open until it has run, as any handle does.
    ///
    /// It saves the future, its slot and its wake-up per record. A closure that captures
    /// nothing (counting into a `static`, say, as one shared Java `Callback` would) is boxed
    /// without an allocation: in `bench-e2e` (client `kprod-callback`, 100 B on Tansu) it
    /// takes about a quarter off kprod's CPU per record (0.77×, 0.65–0.82 over 5 rounds; a
    /// third when each future had a channel of its own, before outcomes shared slabs; at
    /// 1 KiB level, 0.99×). One that captures an `Arc` allocates per record and saved less
    /// (0.91× of the channels).
    ///
    /// Cancellation and errors: as [`Self::enqueue`].
    pub async fn enqueue_with<F>(&self, record: Record, on_delivery: F) -> Result<(), DeliveryError>
    where
        F: FnOnce(Result<Delivery, DeliveryError>) + Send + 'static,
    {
        let done = Done::Callback(Callback::new(Box::new(on_delivery)));
        self.accept(record, done).await.map(drop)
    }

    /// Accepts `record` with the given outcome handler: on the caller's task when it can,
    /// else through the driver. Returns the record's timestamp, and its slot for a
    /// [`Done::Future`].
    async fn accept(
        &self,
        record: Record,
        done: Done,
    ) -> Result<(i64, Option<slots::Bound>), DeliveryError> {
        // The cooperative budget is spent before the record is taken, as tokio's channels
        // spend it: a future that returns `Pending` here has accepted nothing. (Spent after,
        // every enqueue past the budget's 128th within one poll of its task accepted its
        // record and returned `Pending`, so `now_or_never()` or a zero `timeout` dropped an
        // accepted record's outcome, and a caller that kept it to retry sent it twice; a
        // review finding.) The only await point on the path with room: without it a loop of
        // enqueues would never yield to the scheduler.
        tokio::task::coop::consume_budget().await;
        let (record, done, ticket) = match self.try_accept(record, done) {
            Accept::Accepted(timestamp, slot) => return Ok((timestamp, slot)),
            Accept::Refused(e) => return Err(e),
            Accept::Wait(record, done, ticket) => (record, done, ticket),
        };
        let timestamp = record.timestamp;
        let (accepted, accepted_rx) = oneshot::channel();
        let cmd = Command::Send {
            record,
            accepted,
            done,
            since: now(),
            _ticket: ticket,
        };
        if let Err(mpsc::error::SendError(Command::Send { record, .. })) = self.tx.send(cmd).await {
            return Err(refused_after_stop(self.fatal.get(), record));
        }
        // Unconstrained: a verdict already given is taken whatever the budget left (the
        // record may be accepted; the future must not drop its outcome for a yield).
        let verdict = WakeIfAbandoned::new(&self.shared)
            .around(tokio::task::coop::unconstrained(accepted_rx))
            .await;
        match verdict {
            Ok(Ok(slot)) => Ok((timestamp, slot)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(stopped_before_acceptance()),
        }
    }

    /// Accepts `record` into the core on the caller's task, under the lock it shares with the
    /// driver, unless records already wait for the driver (then it goes behind them) or the
    /// buffer is full. Wakes the driver only if the core now has something to do before the
    /// deadline the driver waits for, and only if it was not woken already since it last
    /// drained: at high rates about once per batch, not once per record.
    fn try_accept(&self, mut record: Record, done: Done) -> Accept {
        let shared = &self.shared;
        let mut core = shared.lock();
        // One clock read per record, under the lock (the core's time must not go back
        // between two records: a batch is never younger than a record in it), and the
        // record's timestamp from the same read.
        let at = now();
        if record.timestamp == 0 {
            record.timestamp = shared.wall.ms_at(at);
        }
        if core.stopped || core.close_pending {
            drop(core);
            return Accept::Refused(refused_after_stop(self.fatal.get(), record));
        }
        if core.backlogged || shared.waiting.load(Ordering::SeqCst) > 0 {
            // A record the core refuses whatever the room (a bad topic name or partition, too
            // large) is refused now, not after waiting behind the others for memory it does
            // not need (and then refused `QueueFull` at `max.block.ms`; a review finding).
            let before = core.producer.wake_generation();
            return match core.producer.precheck(at, record) {
                Ok(record) => Accept::Wait(record, done, Ticket::new(shared)),
                Err(e) => {
                    wake_if_changed(shared, core, before);
                    Accept::Refused(refusal(self.fatal.get(), e))
                }
            };
        }
        let before = core.producer.wake_generation();
        let timestamp = record.timestamp;
        match core.offer(self.fatal.get(), at, record, done) {
            Verdict::Accepted(slot) => {
                wake_if_changed(shared, core, before);
                Accept::Accepted(timestamp, slot)
            }
            Verdict::Full(record, done) => Accept::Wait(record, done, Ticket::new(shared)),
            // A refusal may still have asked the driver for something: a record for a
            // partition beyond the known count asks for fresh metadata, so that a partition
            // just added is taken next time.
            Verdict::Refused(e) => {
                wake_if_changed(shared, core, before);
                Accept::Refused(e)
            }
        }
    }

    /// [`Self::try_accept`] for the front of `queued`, under one lock: each record accepted or
    /// refused is taken off with its verdict pushed to `results`, until one must wait (the
    /// rest stay in `queued`, for the driver, and the ticket taken under the lock counts
    /// them as waiting before any later record can be accepted), or until
    /// [`MANY_PER_LOCK`] records were offered ([`Many::Paused`]: the caller lets go of the
    /// lock a moment and goes on).
    fn accept_many(
        &self,
        queued: &mut VecDeque<(Record, Done)>,
        results: &mut Vec<Verdicts>,
    ) -> Many {
        let shared = &self.shared;
        let mut core = shared.lock();
        if core.close_pending {
            // Closed while sends waited for memory: what is left of these is refused, as
            // every record enqueued since.
            drop(core);
            let fatal = self.fatal.get();
            results.extend(
                queued
                    .drain(..)
                    .map(|(r, _)| Err(refused_after_stop(fatal, r))),
            );
            return Many::Done;
        }
        if core.stopped || core.backlogged || shared.waiting.load(Ordering::SeqCst) > 0 {
            // The driver refuses them, or accepts them in order.
            return Many::Wait(Ticket::new(shared));
        }
        let before = core.producer.wake_generation();
        let at = now();
        let mut offered = 0;
        let mut full = false;
        while offered < MANY_PER_LOCK {
            let Some((record, done)) = queued.pop_front() else {
                break;
            };
            offered += 1;
            match core.offer(self.fatal.get(), at, record, done) {
                Verdict::Accepted(slot) => results.push(Ok(slot)),
                Verdict::Full(record, done) => {
                    queued.push_front((record, done));
                    full = true;
                    break;
                }
                Verdict::Refused(e) => results.push(Err(e)),
            }
        }
        let many = if queued.is_empty() {
            Many::Done
        } else if full {
            Many::Wait(Ticket::new(shared))
        } else {
            Many::Paused
        };
        wake_if_changed(shared, core, before);
        many
    }

    /// Sends a record and waits for its outcome: [`Self::enqueue`], then the
    /// [`DeliveryFuture`].
    ///
    /// Cancellation: dropping this future before the record is accepted is
    /// [`Self::enqueue`]'s case; after, the record is delivered anyway and only its outcome
    /// goes unobserved.
    ///
    /// # Errors
    /// As [`Self::enqueue`], and every way an accepted record can fail: see [`ErrorKind`]
    /// and [`DeliveryError::persisted`].
    pub async fn send(&self, record: Record) -> Result<Delivery, DeliveryError> {
        self.enqueue(record).await?.await
    }

    /// [`Self::enqueue`] for several records at once: one lock (and at most one wake-up of
    /// the producer task) per 1,024 records, the lock let go between them (so a sender on
    /// another task may get a record in between, and the producer's task moves; a `close`
    /// called meanwhile refuses the records not yet taken, `Closed`, and a `flush` covers
    /// only those taken before it). Returns one result per record, in order, once every
    /// record was accepted or refused; records are accepted in order, and while
    /// `buffer.memory` is full (or the record-count limit reached) the rest wait (handed to
    /// the producer task in one message, which takes them 1,024 at a time too, in their
    /// place before later sends, flushes and closes) as a loop of `enqueue` would: refused `QueueFull`
    /// once `max.block.ms` passes with none of them taken (accepted, or refused for a reason
    /// of its own): a wait per record taken, not one bound for the whole call, also while a
    /// `flush` or `close` waits behind it. It takes turns with the other sends waiting: once
    /// some of its records were taken, the next memory freed goes to those first (not while
    /// a `flush` or `close` called meanwhile waits: it keeps its place before them). So the
    /// records of calls made at the same time (from several tasks, or joined on one) may be
    /// accepted interleaved (between pieces, and while they wait for memory); await a call
    /// before making the next
    /// when their records must stay in call order, as a loop of `enqueue` does. A zero
    /// timestamp is set to the current wall-clock time.
    ///
    /// Cancellation: if this future is dropped before it returns, a prefix of the records
    /// may have been accepted (those are delivered like any other record) and the rest are
    /// never sent.
    pub async fn enqueue_many<I>(&self, records: I) -> Vec<Result<DeliveryFuture, DeliveryError>>
    where
        I: IntoIterator<Item = Record>,
    {
        let records = records.into_iter();
        let mut queued = VecDeque::with_capacity(records.size_hint().0);
        let mut timestamps = Vec::with_capacity(records.size_hint().0);
        let stamp = self.shared.wall.ms_at(now());
        for mut record in records {
            if record.timestamp == 0 {
                record.timestamp = stamp;
            }
            timestamps.push(record.timestamp);
            queued.push_back((record, Done::Future));
        }
        if timestamps.is_empty() {
            return Vec::new();
        }
        let n = timestamps.len();
        // The cooperative budget is spent before any record is taken (as in `accept`): a
        // future that returns `Pending` here has accepted nothing.
        tokio::task::coop::consume_budget().await;
        let mut results = Vec::with_capacity(n);
        // A long list is taken in pieces, the lock let go between them, so that the
        // producer's task (acknowledgements, linger timers) and other senders are not held
        // up for the whole list (200,000 records under one hold took tens of milliseconds).
        let ticket = loop {
            match self.accept_many(&mut queued, &mut results) {
                Many::Done => break None,
                Many::Wait(ticket) => break Some(ticket),
                Many::Paused => tokio::task::yield_now().await,
            }
        };
        let verdicts = if queued.is_empty() {
            results
        } else {
            let (accepted, accepted_rx) = oneshot::channel();
            let cmd = Command::SendMany {
                records: queued,
                results,
                accepted,
                since: now(),
                _ticket: ticket.unwrap_or_else(|| Ticket::new(&self.shared)),
            };
            match self.tx.send(cmd).await {
                Ok(()) => WakeIfAbandoned::new(&self.shared)
                    .around(tokio::task::coop::unconstrained(accepted_rx))
                    .await
                    .unwrap_or_else(|_| (0..n).map(|_| Err(stopped())).collect()),
                Err(mpsc::error::SendError(cmd)) => {
                    let Command::SendMany {
                        records,
                        mut results,
                        ..
                    } = cmd
                    else {
                        unreachable!("the command sent")
                    };
                    results.extend(
                        records
                            .into_iter()
                            .map(|(record, _)| Err(refused_after_stop(self.fatal.get(), record))),
                    );
                    results
                }
            }
        };
        timestamps
            .into_iter()
            .zip(verdicts)
            .map(|(timestamp, v)| match v {
                Ok(Some(slot)) => Ok(DeliveryFuture::new(slot, timestamp)),
                Ok(None) => unreachable!("a future's record is bound to a slot"),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// [`Self::send`] for several records: [`Self::enqueue_many`], then every
    /// [`DeliveryFuture`], in order.
    pub async fn send_many<I>(&self, records: I) -> Vec<Result<Delivery, DeliveryError>>
    where
        I: IntoIterator<Item = Record>,
    {
        let mut out = Vec::new();
        for r in self.enqueue_many(records).await {
            out.push(match r {
                Ok(f) => f.await,
                Err(e) => Err(e),
            });
        }
        out
    }

    /// Sends everything buffered now, and resolves once every record enqueued before this
    /// call has resolved (delivered or failed: each record's future says which). Sends
    /// already waiting for `buffer.memory` when it is called count as enqueued before it:
    /// they are accepted first (each within `max.block.ms`), then waited for. The wait is
    /// thus bounded by `delivery.timeout.ms`, plus `max.block.ms` when sends were waiting
    /// (or, for an [`Self::enqueue_many`] still having records taken, `max.block.ms` after
    /// the last one taken); [`Self::flush_timeout`] takes a shorter deadline. Dropping it
    /// cancels nothing. Under `acks=0`, where a record resolves once its request is handed
    /// to a connection's writer, it also waits until each writer has written what it held
    /// once those records were handed over (bytes handed over later do not hold it), or lost
    /// it with a failed connection (a write that makes no progress for `request.timeout.ms`
    /// fails it), as the Java client's flush completes an acks=0 request once it is written.
    /// A flush taken after a close has finished resolving every record returns at once; the
    /// close itself waits for the writers.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// [`Self::flush`] with a deadline.
    ///
    /// The deadline's timer is set on the caller's runtime when called inside one, which then
    /// needs its time driver (`enable_time` or `enable_all`), as any `tokio::time::timeout`
    /// does; outside a runtime it is set on the producer's, where a current-thread runtime's
    /// timers run only while its `block_on` runs.
    ///
    /// # Errors
    /// [`Timeout`] if records enqueued before the call are still unresolved after `timeout`
    /// (or, under acks=0, still held by the writers);
    /// they go on being delivered.
    pub async fn flush_timeout(&self, timeout: Duration) -> Result<(), Timeout> {
        self.timeout(timeout, self.flush())
            .await
            .map_err(|_| Timeout {
                operation: "flush",
                after: timeout,
            })
    }

    /// Stops accepting records, delivers everything accepted, and ends the driver task.
    /// Later records are refused ([`SendError::Closed`]); sends already waiting for
    /// `buffer.memory` when it is called are not: they are accepted once there is room (or
    /// refused at `max.block.ms`), then drained with the rest, so the wait is bounded by
    /// `max.block.ms` plus `delivery.timeout.ms`. Dropping it does not undo the close.
    pub async fn close(&self) {
        {
            // Records are accepted outside the driver, so the core stops accepting them here,
            // at once: a record enqueued after this call started is refused. Unless records
            // already wait for memory: they go first, and the driver closes the core behind
            // them when it takes the command below. Records enqueued meanwhile are refused
            // (`Core::close_pending`): before, they queued behind those and were accepted.
            // The driver also closes the core behind the waiting sends if this call is
            // dropped before its command is queued (a full command queue), which undid it.
            let mut core = self.shared.lock();
            if !core.stopped && core.producer.fatal_error().is_none() {
                if self.shared.waiting.load(Ordering::SeqCst) == 0 {
                    core.producer.close(now());
                } else {
                    core.close_pending = true;
                }
            }
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Close(Some(tx))).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// How many partitions `topic` has, as Java's `partitionsFor` tells (for an application
    /// that picks partitions itself): from the producer's metadata if it knows the topic,
    /// else once a metadata answer describes it (asked for now, and again after each
    /// `retry.backoff.ms` while the topic does not exist), waiting at most `max.block.ms`.
    /// The topic is then in use for `metadata.max.idle.ms`, as after a record to it.
    ///
    /// # Errors
    /// [`PartitionCountError`]: an invalid name, no answer describing the topic within
    /// `max.block.ms` (with what the last answer said), the cluster refusing to describe it,
    /// or the producer closed or failed.
    pub async fn partition_count(&self, topic: &str) -> Result<usize, PartitionCountError> {
        {
            // Known: answered here, the topic marked in use. Anything else (a topic to ask
            // about, or an error to tell) goes through the driver.
            let mut core = self.shared.lock();
            if !core.stopped && core.producer.want_topic(now(), topic) {
                if let Some(n) = core.producer.partition_count(topic) {
                    return Ok(n);
                }
            }
        }
        let (tx, rx) = oneshot::channel();
        let cmd = Command::PartitionCount {
            topic: topic.to_owned(),
            since: now(),
            tx,
        };
        if self.tx.send(cmd).await.is_err() {
            return Err(stopped_error(self.fatal.get()));
        }
        rx.await
            .unwrap_or_else(|_| Err(stopped_error(self.fatal.get())))
    }

    /// Stops the producer now, as the Java client's `close(Duration.ZERO)` does: every record
    /// not yet acknowledged fails at once with [`FailureReason::Fatal`]`(`[`FatalError::Aborted`]`)`
    /// and its truthful persistence (not persisted unless an attempt of it went unanswered),
    /// the record handed back; records waiting for `buffer.memory` are refused with it;
    /// connections close; later records are refused; and [`Self::fatal`] returns it.
    /// Returns once every record has resolved and the driver has ended. Nothing is done if
    /// the producer has already failed; after a close it stops what is still being delivered.
    ///
    /// To bound a close as Java's `close(timeout)` does: `if p.close_timeout(t).await.is_err()
    /// { p.abort().await }`.
    pub async fn abort(&self) {
        {
            let mut core = self.shared.lock();
            if !core.stopped && core.producer.fatal_error().is_none() {
                core.producer.abort(now(), ABORTED);
                // Before any record resolves or is refused (the driver sets it from the
                // core's `Event::Fatal` only when it drains).
                let _ = self.fatal.set(Fatal::Producer(FatalError::Aborted {
                    reason: ABORTED.to_owned(),
                }));
                // The driver carries the failures and closes out (or, past its loop, stops
                // waiting for its writers).
                core.notified = true;
                drop(core);
                self.shared.wake.notify_one();
            }
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Close(Some(tx))).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// [`Self::close`] with a deadline.
    ///
    /// The deadline's timer is set on the caller's runtime when called inside one, which then
    /// needs its time driver (`enable_time` or `enable_all`), as any `tokio::time::timeout`
    /// does; outside a runtime it is set on the producer's, where a current-thread runtime's
    /// timers run only while its `block_on` runs.
    ///
    /// # Errors
    /// [`Timeout`] if records are still unresolved after `timeout`. The producer is closed to
    /// new records either way (also when the deadline passed while the request waited for
    /// room in a full command queue), and the driver task keeps delivering the accepted ones
    /// in the background until each resolves (at the latest at its `delivery.timeout.ms`).
    pub async fn close_timeout(&self, timeout: Duration) -> Result<(), Timeout> {
        self.timeout(timeout, self.close())
            .await
            .map_err(|_| Timeout {
                operation: "close",
                after: timeout,
            })
    }

    /// `tokio::time::timeout`, its timer set on the producer's runtime when called outside
    /// one (as every other method works there: a thread that is not a runtime's, awaiting
    /// with any executor; a current-thread runtime's timers run only while its `block_on`
    /// does).
    fn timeout<F: Future>(&self, timeout: Duration, future: F) -> tokio::time::Timeout<F> {
        let _entered =
            (tokio::runtime::Handle::try_current().is_err()).then(|| self.runtime.enter());
        tokio::time::timeout(timeout, future)
    }
}

/// What the core holds, in bytes against `buffer.memory` and in records against
/// `queue.buffering.max.messages`: a send refused for room waits until either drops.
fn held(core: &Core) -> (usize, usize) {
    let p = &core.producer;
    (
        p.buffered_bytes() + core.slabs.uncharged(),
        p.pending_records(),
    )
}

/// Releases the lock, then wakes the driver if records accepted under it changed the core's
/// [`Producer::wake_generation`] since `before` and the driver was not woken already since it
/// last drained.
fn wake_if_changed(shared: &Shared, mut core: MutexGuard<'_, Core>, before: u64) {
    let wake = !core.notified && core.producer.wake_generation() != before;
    if wake {
        core.notified = true;
    }
    drop(core);
    if wake {
        shared.wake.notify_one();
    }
}

fn stopped() -> DeliveryError {
    DeliveryError::new(ErrorKind::DriverStopped, Persistence::PossiblyPersisted)
}

/// The driver stopped without answering whether it accepted a record sent alone: it answers
/// every such record as it accepts it, before anything of it can be sent, so this one was not
/// (a stopping driver refuses what it holds, with the record, so this is a fallback for a
/// driver that panicked). Not for `SendMany`, whose records the driver may have accepted in
/// earlier rounds (and sent) before it died: those stay possibly persisted.
fn stopped_before_acceptance() -> DeliveryError {
    DeliveryError::new(ErrorKind::DriverStopped, Persistence::NotPersisted)
}

fn refused(e: SendError) -> DeliveryError {
    DeliveryError::new(ErrorKind::Refused(Box::new(e)), Persistence::NotPersisted)
}

/// The core's refusal of a record, for its sender: a failed core refuses every record as
/// closed, so that one says why instead ([`refused_after_stop`]).
fn refusal(fatal: Option<&Fatal>, e: SendError) -> DeliveryError {
    match e {
        SendError::Closed(record) => refused_after_stop(fatal, record),
        e => refused(e),
    }
}

/// Answers a `Send` or `SendMany` that arrived once the producer stopped: every record is
/// refused with [`refused_after_stop`] and handed back. Other commands are left alone.
fn refuse_records(fatal: Option<&Fatal>, cmd: Command) {
    match cmd {
        Command::Send {
            record, accepted, ..
        } => {
            let _ = accepted.send(Err(refused_after_stop(fatal, record)));
        }
        Command::SendMany {
            records,
            mut results,
            accepted,
            ..
        } => {
            results.extend(
                (records.into_iter()).map(|(record, _)| Err(refused_after_stop(fatal, record))),
            );
            let _ = accepted.send(results);
        }
        _ => {}
    }
}

/// A record refused once the producer is closed or failed: the fatal error if there is one
/// (the error the pending records got), else `Closed`; the record is handed back either way.
fn refused_after_stop(fatal: Option<&Fatal>, record: Record) -> DeliveryError {
    match fatal {
        Some(f) => f.record_error(Persistence::NotPersisted, Some(Box::new(record))),
        None => refused(SendError::Closed(record)),
    }
}

/// Nanoseconds since the Unix epoch now (0 before it).
fn wall_clock_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Wall-clock milliseconds (record timestamps) worked out from a monotonic [`Instant`] the
/// caller read anyway, so that an enqueue reads the clock once, not twice (each read is a
/// `clock_gettime`, about a tenth of the adapter's CPU per 100 B record before). The offset
/// between the two clocks is taken again from `SystemTime` at most [`WallClock::REANCHOR`]
/// after the last time: both clocks are slewed alike by NTP, so they part only when the wall
/// clock is stepped, and a step shows in the timestamps within that time. Lock-free: the
/// offset and its time are each a valid mapping on their own, so a reader that sees one
/// thread's offset with another's time is still right.
struct WallClock {
    base: Instant,
    /// Wall-clock nanoseconds minus monotonic nanoseconds since `base`.
    offset_ns: AtomicI64,
    /// Monotonic nanoseconds since `base` when `offset_ns` was taken.
    anchored_at: AtomicU64,
}

impl WallClock {
    const REANCHOR: Duration = Duration::from_millis(100);

    fn new(base: Instant) -> Self {
        let clock = Self {
            base,
            offset_ns: AtomicI64::new(0),
            anchored_at: AtomicU64::new(0),
        };
        clock.anchor(0);
        clock
    }

    fn mono_ns(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Takes the offset again at monotonic time `mono`; the wall-clock nanoseconds then.
    fn anchor(&self, mono: u64) -> i64 {
        let wall = wall_clock_ns();
        let mono_i = i64::try_from(mono).unwrap_or(i64::MAX);
        self.offset_ns
            .store(wall.saturating_sub(mono_i), Ordering::Relaxed);
        self.anchored_at.store(mono, Ordering::Relaxed);
        wall
    }

    /// The wall-clock time in milliseconds at `at` (an instant read just now).
    fn ms_at(&self, at: Instant) -> i64 {
        let mono = self.mono_ns(at);
        let since = mono.wrapping_sub(self.anchored_at.load(Ordering::Relaxed));
        let wall = if since > Self::REANCHOR.as_nanos() as u64 {
            // Also an instant from before the last anchor (the subtraction wrapped).
            self.anchor(mono)
        } else {
            let mono_i = i64::try_from(mono).unwrap_or(i64::MAX);
            self.offset_ns
                .load(Ordering::Relaxed)
                .saturating_add(mono_i)
        };
        wall.max(0) / 1_000_000
    }
}

/// Notices wall-clock time that the monotonic clock did not count: a suspend (Linux's
/// `CLOCK_MONOTONIC` and macOS's uptime clock stand still while the machine sleeps) or a
/// step of the wall clock. Reads the real clocks (not tokio's, which paused-time tests move
/// on their own), three reads per drain.
struct ClockWatch {
    base: Instant,
    /// Wall-clock nanoseconds minus monotonic nanoseconds since `base`, at the last look.
    offset_ns: i64,
}

impl ClockWatch {
    /// Smaller steps are the clocks' own drift and slewing.
    const JUMP: Duration = Duration::from_secs(1);

    fn new() -> Self {
        let base = Instant::now();
        Self {
            base,
            offset_ns: wall_clock_ns(),
        }
    }

    /// How far the wall clock moved ahead of the monotonic one since the last look, if at
    /// least [`Self::JUMP`].
    fn jumped(&mut self) -> Option<Duration> {
        let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let before = ns(self.base.elapsed());
        let wall = wall_clock_ns();
        let after = ns(self.base.elapsed());
        // Preempted between the reads (a busy host waking, a VM's stolen time), the wall
        // clock was read somewhere between `before` and `after`: the jump is judged on the
        // smaller offset and the larger one is kept, so that a pause is never taken for a
        // jump and the first look after a resume is not skipped.
        let by = self.observe(wall, after);
        self.offset_ns = wall.saturating_sub(before);
        by
    }

    /// [`Self::jumped`] for the clocks read as `wall_ns` (since the epoch) and `mono_ns`
    /// (since `base`).
    fn observe(&mut self, wall_ns: i64, mono_ns: i64) -> Option<Duration> {
        let offset = wall_ns.saturating_sub(mono_ns);
        let by = offset.saturating_sub(self.offset_ns);
        self.offset_ns = offset;
        let by = Duration::from_nanos(u64::try_from(by).ok()?);
        (by >= Self::JUMP).then_some(by)
    }
}

/// The core's clock: tokio's, so that paused-time tests are virtual end to end.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

enum ReadResult {
    Data(BytesMut),
    Closed,
    /// Reading or writing failed with this error (the connection is gone).
    Failed(io::Error),
    /// The writer has been writing without a break since it stood at this byte of what it
    /// was handed ([`WriteProgress`], `Producer::handle_writing`).
    Writing {
        since: u64,
    },
}

enum Conn {
    Connecting {
        task: AbortHandle,
        addr: Arc<str>,
    },
    Open {
        tx: mpsc::UnboundedSender<Bytes>,
        /// Bytes sent to the writer and not yet written (or dropped with a failed writer);
        /// counted only under acks=0 (`Driver::write_backlog_limit`).
        unwritten: Option<Arc<AtomicUsize>>,
        /// Bytes handed to the writer in all (`queued` less `unwritten` were written): an
        /// acks=0 flush waits for each connection to have written what it held when the
        /// flush's records were handed over ([`Flush`]).
        queued: u64,
        /// `None` once the connection closes in good order (then [`finish`] holds it).
        reader: Option<tokio::task::JoinHandle<()>>,
        /// Set when the connection closes in good order: the reader then discards what it
        /// reads until the broker closes its side.
        closing: Arc<AtomicBool>,
        /// `None` once the writer may finish on its own (the producer closed).
        writer: Option<tokio::task::JoinHandle<()>>,
        buf: BytesMut,
        addr: Arc<str>,
    },
}

impl Conn {
    fn addr(&self) -> &Arc<str> {
        match self {
            Self::Connecting { addr, .. } | Self::Open { addr, .. } => addr,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        match self {
            Self::Connecting { task, .. } => task.abort(),
            Self::Open { reader, writer, .. } => {
                if let Some(r) = reader {
                    r.abort();
                }
                if let Some(w) = writer {
                    w.abort();
                }
            }
        }
    }
}

struct Driver<C: Connector> {
    /// The core and the accepted records' senders, shared with the handles.
    shared: Arc<Shared>,
    /// Notices a suspend, which the core's clock does not count.
    clock_watch: ClockWatch,
    connector: Arc<C>,
    conns: HashMap<ConnId, Conn>,
    connecting: JoinSet<(ConnId, io::Result<C::Stream>)>,
    io_tx: mpsc::Sender<(ConnId, ReadResult)>,
    /// Callbacks' outcomes taken from `Core::pending` under the lock, called once it is
    /// released. (A future's outcome goes into its slot under the lock.)
    outbox: Vec<(Callback, Outcome)>,
    /// Wakers of futures whose outcomes came, to wake once the lock is released
    /// (`slots.rs`).
    to_wake: Vec<std::task::Waker>,
    /// Diagnostics taken under the lock, logged once it is released: a slow log writer
    /// (a subscriber writing to a file or a full pipe) then holds up the driver alone, not
    /// every `enqueue` waiting for the lock (a review finding).
    to_log: Vec<Log>,
    /// Peaks of the lengths of `outbox`, `to_wake` and `to_log` at a hand-over, halved
    /// every second since the time kept beside them ([`trim`]).
    handed_over_peaks: ([usize; 3], Option<Instant>),
    /// The metrics taken for a `metrics()` call in the current hold of the lock, while no
    /// other command has changed the core since: the next calls in the same burst get a
    /// copy. (Taking them walks every partition: 10,000 partitions and tasks calling
    /// `metrics()` in a loop held the lock for the whole burst; a review finding.)
    metrics_snapshot: Option<Metrics>,
    /// Commands waiting behind a record refused with `QueueFull`, in arrival order.
    deferred: VecDeque<Command>,
    /// The length of `deferred` at which the sends their callers gave up are purged.
    deferred_purge_at: usize,
    /// How many flushes and closes `deferred` holds: an `enqueue_many` taking turns never
    /// goes behind one.
    deferred_barriers: usize,
    /// What the core held ([`held`]: bytes and records) when the front of `deferred` was
    /// last refused.
    refused_at: Option<(usize, usize)>,
    /// The last `apply` stopped a `SendMany` after [`MANY_PER_LOCK`] records, room left:
    /// it goes on after the lock was let go ([`Self::pump_deferred`]).
    paused_many: bool,
    /// Flush waiters: resolved once no pending record is below the bound, and under acks=0
    /// once the writers wrote what they held then ([`Flush`]).
    flushes: Vec<Flush>,
    closers: Vec<oneshot::Sender<()>>,
    close_requested: bool,
    deadline: Option<Instant>,
    /// Where OAUTHBEARER tokens come from.
    token_provider: Option<Arc<dyn TokenProvider>>,
    /// Shared with the handles: why the producer failed, once it has.
    fatal: Arc<OnceLock<Fatal>>,
    /// Writers of connections closed in good order (`Output::Close { flush: true }`),
    /// finishing the bytes they hold (acks=0 requests whose records are already `Sent`);
    /// `close` waits for them.
    finishing: Vec<tokio::task::JoinHandle<()>>,
    /// acks=0 connections closed in good order whose writers finish what they hold: their
    /// bytes not yet written, and their writer (a flush waits for them, [`Flush`]).
    draining: Vec<(ConnId, Arc<AtomicUsize>, AbortHandle)>,
    /// Shared with the handles: the metrics when the driver stopped.
    final_metrics: Arc<OnceLock<Metrics>>,
    /// With `acks=0` a record leaves `buffer.memory` when its request is handed over, so
    /// this bounds the bytes queued for the writers instead: above it the driver takes no
    /// new command (the application's sends wait) until the writers catch up. `None` for
    /// acks 1 and all, where `buffer.memory` already bounds them.
    write_backlog_limit: Option<usize>,
    /// With `acks=0` nothing answers a request, so a broker that stops reading would go
    /// unnoticed: a write that makes no progress for this long (`request.timeout.ms`) fails
    /// its connection, which the core then replaces. `None` for acks 1 and all, where the
    /// core's request timeout notices. (The kernel reports a full socket writable again only
    /// once part of its send buffer has drained, so on a link slower than about a third of
    /// the send buffer per `request.timeout.ms` a live connection could be given up too.)
    write_stall: Option<Duration>,
    /// Notified by every writer after each write.
    written: Arc<Notify>,
    /// The application's commands.
    commands: mpsc::Receiver<Command>,
    /// [`ProducerHandle::partition_count`] calls waiting for metadata.
    partition_waiters: Vec<PartitionWaiter>,
}

/// A [`ProducerHandle::partition_count`] call waiting for metadata.
struct PartitionWaiter {
    topic: String,
    /// When the call times out (`max.block.ms` after it was made).
    deadline: Instant,
    tx: oneshot::Sender<Result<usize, PartitionCountError>>,
}

/// What woke the driver.
enum Input<S> {
    Command(Command),
    CommandsClosed,
    Io(ConnId, ReadResult),
    Connected(Result<(ConnId, io::Result<S>), JoinError>),
    Timer,
    /// A handle accepted a record that gives the core something to do, or (acks=0) a writer
    /// caught up.
    Woken,
}

impl<C: Connector> Drop for Driver<C> {
    /// However the driver ends (finished, or dropped with its runtime), records are refused
    /// from now on, and accepted records still pending resolve as
    /// [`ErrorKind::DriverStopped`] rather than never.
    ///
    /// Dropped with its runtime, it also keeps the promises a finished driver keeps: records
    /// never accepted (waiting for memory, or still in the command queue) are refused and
    /// handed back, not reported possibly persisted, and `metrics()` answers with the last
    /// metrics, not zeros.
    fn drop(&mut self) {
        self.deliver();
        let shared = Arc::clone(&self.shared);
        // A panic while the core was locked may have left it half-way (the lock is poisoned
        // then); any other panic (a current-thread runtime dropped while its thread unwinds
        // from the application's own panic, which drops this task on that thread) left it
        // whole. Before, any unwinding thread counted as half-way, and the lingering records
        // of such a runtime were reported possibly persisted without their records (review
        // finding, 2026-12-06).
        let (mut core, half_way) = match shared.core.lock() {
            Ok(core) => (core, false),
            Err(poisoned) => (poisoned.into_inner(), true),
        };
        // Ended before the producer was closed (or asked to close) or failed: it says so from
        // now on, where a later record was refused as if the application had closed it (a
        // review finding). Set before any record's outcome is given, as `fatal()` promises.
        let ended = !core.stopped && core.producer.fatal_error().is_none();
        let lost = ended
            && !self.close_requested
            && !core.producer.is_closing()
            && !core.close_pending
            && self.fatal.get().is_none();
        if lost {
            let _ = self.fatal.set(Fatal::DriverStopped);
        }
        // Said once, outside the lock (a subscriber may call the producer): the records a
        // `main` returning before they resolved loses, closed or not (a review of what
        // operators read: nothing above DEBUG said so).
        let lost_records = if ended {
            core.producer.pending_records()
        } else {
            0
        };
        // Dropped with its runtime (not finished, the core whole): the core says which of
        // the records it holds were never sent (not persisted, handed back) and which may be
        // in the log. Before, every one was reported possibly persisted without its record,
        // so a `#[tokio::main]` ending with records still lingering lost them with no way to
        // send them again.
        if !core.stopped && !core.pending.is_empty() && !half_way {
            // A core already stopped (`ProducerHandle::abort`, a fatal error) still holds the
            // events that say so, which keep their own kind.
            let already = core.producer.fatal_error().is_some();
            if !already {
                core.producer
                    .abort(now(), "the producer's driver task stopped");
            }
            loop {
                match core.producer.poll_output() {
                    Output::Wait { .. } => break,
                    Output::Event(e @ (Event::Delivered(_) | Event::Sent(_))) => {
                        self.event(&mut core, e);
                    }
                    Output::Event(e @ (Event::Failed { .. } | Event::Fatal(_))) if already => {
                        self.event(&mut core, e);
                    }
                    // A failure the core had decided before this drop (held behind an
                    // earlier batch of its partition, which is retried) keeps its own
                    // reason: relabelled, a record a broker refused for good (INVALID_RECORD)
                    // read as one to send again (a review finding).
                    Output::Event(e @ Event::Failed { .. }) if !aborted(&e) => {
                        self.event(&mut core, e);
                    }
                    Output::Event(Event::Failed {
                        id,
                        persisted,
                        record,
                        detail,
                        ..
                    }) => {
                        let kind = ErrorKind::DriverStopped;
                        self.failed(&mut core, id, kind, persisted, record, detail);
                    }
                    // Nothing is written, connected or closed any more; the fatal error
                    // is this drop's own.
                    _ => {}
                }
            }
            core.slabs.publish(&mut self.to_wake);
            drop(core);
            self.deliver();
            core = shared.lock();
        }
        core.stopped = true;
        let pending = std::mem::take(&mut core.pending);
        let mut waiting = Vec::new();
        core.slabs.close(&mut waiting);
        // After the slabs are closed, and not from a core a panic left half-way: a second
        // panic there, while this thread unwinds from the first, would abort the process, and
        // with the slabs still open it left the futures waiting forever (a review finding).
        // Metrics then stay zeros.
        if !half_way {
            let _ = self.final_metrics.set(core.producer.metrics());
        }
        drop(core);
        if lost_records > 0 {
            warn!(
                records = lost_records,
                "the producer's task stopped before its records resolved (its runtime \
                 dropped, or a panic): they fail DriverStopped (await ProducerHandle::close \
                 before the runtime ends)"
            );
        }
        // Each says "stopped" (a callback is called, a future finds its slab closed), lowest
        // id first, outside the lock.
        for (_, done) in pending.into_ordered() {
            drop(done);
        }
        slots::wake_all(&mut waiting);
        self.refuse_commands();
    }
}

/// Compresses batches that closed since the last drain without the lock, so that the
/// application's threads keep handing records over meanwhile (a gzip batch of a megabyte
/// takes tens of milliseconds; before, the lock was held for it, inside the drain's seal):
/// takes them from the core (copies of their records), releases the lock, compresses,
/// takes the lock again and hands the results back for their seals. At most about a
/// request's worth (`max.request.size` of records) each time, so that the drain, which sends
/// them and takes in answers, is not put off by more than it would have spent compressing
/// them itself; the rest wait for the next drain, and batches that go out before they close
/// (linger, flush) or before their turn here are compressed at their seal. Returns the lock
/// held.
fn compress_ahead<'a>(shared: &'a Shared, mut guard: MutexGuard<'a, Core>) -> MutexGuard<'a, Core> {
    let most = guard.producer.config().max_request_size;
    let mut raw = 0;
    let mut tasks = Vec::new();
    while raw < most {
        let Some(t) = guard.producer.poll_compression() else {
            break;
        };
        raw += t.len();
        tasks.push(t);
    }
    if tasks.is_empty() {
        return guard;
    }
    drop(guard);
    let done: Vec<_> = tasks.into_iter().map(CompressionTask::run).collect();
    guard = shared.lock();
    for d in done {
        guard.producer.take_compressed(d);
    }
    guard
}

impl<C: Connector> Driver<C> {
    async fn run(mut self, mut io_rx: mpsc::Receiver<(ConnId, ReadResult)>) {
        let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(sleep);
        let mut armed = None;
        let mut commands_open = true;
        let shared = Arc::clone(&self.shared);
        let max_block;
        {
            let mut core = shared.lock();
            // Batches of compressed topics are compressed here, between an input and the
            // drain, without the lock (`compress_ahead`).
            core.producer.set_compress_ahead(true);
            let cfg = core.producer.config();
            max_block = cfg.max_block;
            if cfg.acks == 0 {
                self.write_backlog_limit = Some(cfg.buffer_memory);
                self.write_stall = Some(cfg.request_timeout);
            }
        }
        let written = Arc::clone(&self.written);
        // The core's deadlines to within the kernel's timer slack (tokio's sleep, below, ends
        // about a millisecond late); stopped when the driver stops.
        let fine = fine_timer::FineTimer::start(Arc::downgrade(&shared), |s: &Shared| &s.wake);
        let mut fine_armed = None;
        let mut input = None;
        loop {
            // One input, then one drain, under the lock the handles take to accept records
            // (released once between them while closed batches are compressed).
            // The clocks read before the lock is taken.
            let jumped = self.clock_watch.jumped();
            let (lowest, finished, backlogged) = {
                let mut guard = shared.lock();
                let core = &mut *guard;
                core.notified = false;
                // Before the drain, which may sequence batches that waited through it; logged
                // outside the lock, as everything is (a subscriber may call the producer).
                if let Some(by) = jumped {
                    self.to_log.push(Log::ClockJumped(by));
                    core.producer.handle_wall_clock_jump(now(), by);
                }
                // Handles may have changed the core since the last hold.
                self.metrics_snapshot = None;
                match input.take() {
                    Some(Input::Command(cmd)) => {
                        self.command(core, cmd);
                        // Whatever else is queued goes in before the one drain below: one
                        // drain (and one wake-up) per burst of records, not per record.
                        for _ in 1..MAX_PER_WAKEUP {
                            let Ok(cmd) = self.commands.try_recv() else {
                                break;
                            };
                            self.command(core, cmd);
                        }
                    }
                    Some(Input::CommandsClosed) => {
                        commands_open = false;
                        self.command(core, Command::Close(None));
                    }
                    Some(Input::Io(conn, r)) => {
                        self.io(core, conn, r);
                        self.take_reads(core, &mut io_rx, MAX_PER_WAKEUP - 1);
                    }
                    Some(Input::Connected(r)) => self.connect_done(core, r),
                    // A wake-up may be for a send waiting for memory (the sleep), or a record
                    // accepted outside the driver; the core's deadline is checked below.
                    Some(Input::Timer | Input::Woken) | None => {}
                }
                // Whatever woke the driver (the fine timer wakes it as a handle does), a
                // deadline reached is handled before the drain: after what the readers and
                // connects finished meanwhile, so that a late wake-up reads an answer that
                // is there before it times its request out (a review finding: on a timer's
                // or a handle's wake-up they waited for the next turn).
                let t = now();
                let due = |d: Option<Instant>| d.is_some_and(|d| d <= t);
                if due(self.deadline) || due(self.block_deadline(max_block)) {
                    self.take_reads(core, &mut io_rx, MAX_PER_WAKEUP);
                    while let Some(r) = self.connecting.try_join_next() {
                        self.connect_done(core, r);
                    }
                }
                if due(self.deadline) {
                    core.producer.handle_timeout(t);
                }
                let mut guard = compress_ahead(&shared, guard);
                let core = &mut *guard;
                // Before the drain: a topic asked about again is asked in it.
                self.answer_partition_waiters(core);
                self.drain(core);
                // The memory this wake-up freed goes to the sends waiting for it before those
                // past `max.block.ms` are refused (a driver woken late refused them although
                // the acknowledgements it read made room: a review finding); what waited
                // behind a refused one is tried again.
                self.pump_deferred(core);
                if self.expire_deferred(core) {
                    self.pump_deferred(core);
                }
                // A close asked for while sends waited for memory, once none waits: its own
                // command may never come (its caller dropped it in a full queue).
                if core.close_pending
                    && !self.close_requested
                    && self.deferred.is_empty()
                    && shared.waiting.load(Ordering::SeqCst) == 0
                {
                    self.command(core, Command::Close(None));
                    self.drain(core);
                }
                let backlogged = self.write_backlogged();
                core.backlogged = backlogged;
                let lowest = core.pending.first();
                let finished = self.finished(core);
                if finished {
                    self.answer_partition_waiters(core);
                }
                (lowest, finished, backlogged)
            };
            // Outcomes, then flushes (a flush never resolves before the records it waits for).
            self.deliver();
            self.resolve_flushes(lowest);
            if finished {
                break;
            }
            let wake = [
                self.deadline,
                self.block_deadline(max_block),
                self.partition_deadline(),
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some(fine) = fine.as_ref().filter(|_| self.deadline != fine_armed) {
                fine_armed = self.deadline;
                fine.set(fine_armed);
            }
            if wake != armed {
                armed = wake;
                if let Some(until) = armed {
                    sleep.as_mut().reset(tokio::time::Instant::from_std(until));
                }
            }
            input = Some(tokio::select! {
                // Taken even while the writers are backed up (acks=0): sends then wait with
                // those waiting for memory, bounded by `max.block.ms`, and metrics, partition
                // counts, flushes and closes are answered.
                cmd = self.commands.recv(), if commands_open => match cmd {
                    Some(cmd) => Input::Command(cmd),
                    None => Input::CommandsClosed,
                },
                Some((conn, r)) = io_rx.recv() => Input::Io(conn, r),
                Some(r) = self.connecting.join_next(), if !self.connecting.is_empty() => {
                    Input::Connected(r)
                }
                () = &mut sleep, if armed.is_some() => Input::Timer,
                // Also while acks=0 sends wait for the backlog: a writer that caught up
                // between `pump_deferred`'s look and `backlogged`'s left its permit here, and
                // with the branch off they slept until `max.block.ms` refused them `QueueFull`
                // (a concurrency review).
                () = written.notified(), if backlogged
                    || !self.flushes.is_empty()
                    || (self.write_backlog_limit.is_some() && !self.deferred.is_empty()) => {
                    Input::Woken
                }
                () = shared.wake.notified() => Input::Woken,
            });
        }
        self.conns.clear();
        // Bounded like any request: a broker that stopped reading cannot hold close forever.
        // One deadline for all of them (they run side by side): two connections to a broker
        // that stopped reading cost one bound, not two.
        let bound = shared.lock().producer.config().request_timeout;
        let deadline = tokio::time::Instant::now() + bound;
        // `ProducerHandle::abort` stops the wait (it wakes the driver).
        let aborted = || shared.lock().producer.fatal_error().is_some();
        // Every record has its outcome and the metrics are final: what is asked meanwhile
        // is answered at once (it waited for the writers before, up to `request.timeout.ms`
        // under acks=0; a review finding), a close waiting with the one that ran.
        let _ = self.final_metrics.set(shared.lock().producer.metrics());
        let mut commands_open = true;
        for w in std::mem::take(&mut self.finishing) {
            let abort = w.abort_handle();
            let mut finish = std::pin::pin!(tokio::time::timeout_at(deadline, w));
            loop {
                if aborted() {
                    abort.abort();
                    break;
                }
                tokio::select! {
                    r = &mut finish => {
                        if r.is_err() {
                            abort.abort();
                        }
                        break;
                    }
                    () = shared.wake.notified() => {}
                    // What the finishing readers and writers still report is dropped (every
                    // connection is gone from the core): left unread, the queue filled and a
                    // writer failing its last write, or a reader at its end, waited on it
                    // until the deadline (a review finding: `close` took `request.timeout.ms`).
                    Some(_) = io_rx.recv() => {}
                    cmd = self.commands.recv(), if commands_open => match cmd {
                        Some(Command::Close(Some(tx))) => self.closers.push(tx),
                        Some(cmd) => self.refuse(cmd),
                        None => commands_open = false,
                    },
                }
            }
        }
        for tx in self.closers.drain(..) {
            let _ = tx.send(());
        }
        self.refuse_commands();
        debug!("producer driver stopped");
    }

    /// Once the driver stops: the records of the commands it will never apply (waiting for
    /// memory, or still queued) are refused and handed back; flushes and closes return;
    /// metrics are the last ones.
    fn refuse_commands(&mut self) {
        self.commands.close();
        let queued = std::iter::from_fn(|| self.commands.try_recv().ok());
        self.deferred_barriers = 0;
        let leftover: Vec<Command> = self.deferred.drain(..).chain(queued).collect();
        for cmd in leftover {
            self.refuse(cmd);
        }
    }

    /// A command the stopped (or stopping) driver will not apply: records refused and
    /// handed back, a flush or close returned, the last metrics.
    fn refuse(&self, cmd: Command) {
        match cmd {
            cmd @ (Command::Send { .. } | Command::SendMany { .. }) => {
                refuse_records(self.fatal.get(), cmd);
            }
            Command::Flush(tx) | Command::Close(Some(tx)) => {
                let _ = tx.send(());
            }
            Command::Metrics(tx) => {
                let _ = tx.send(self.final_metrics.get().cloned().unwrap_or_default());
            }
            Command::PartitionCount { tx, .. } => {
                let _ = tx.send(Err(stopped_error(self.fatal.get())));
            }
            Command::Close(None) => {}
        }
    }

    /// Hands over the outcomes taken under the lock: wakes the futures whose slots were
    /// written, and calls the callbacks.
    fn deliver(&mut self) {
        let used = [self.outbox.len(), self.to_wake.len(), self.to_log.len()];
        slots::wake_all(&mut self.to_wake);
        for (callback, outcome) in self.outbox.drain(..) {
            callback.complete(outcome);
        }
        for l in self.to_log.drain(..) {
            l.write();
        }
        let ([outbox, to_wake, to_log], since) = &mut self.handed_over_peaks;
        let t = now();
        let halvings = since.map_or(0, |s| t.saturating_duration_since(s).as_secs());
        if halvings > 0 || since.is_none() {
            *since = Some(t);
        }
        let halvings = halvings.min(63) as u32;
        trim(&mut self.outbox, outbox, halvings, used[0]);
        trim(&mut self.to_wake, to_wake, halvings, used[1]);
        trim(&mut self.to_log, to_log, halvings, used[2]);
    }

    /// Record `id`, if still pending, was delivered to `(topic, partition)` (at `offset`, or
    /// without one under `acks=0`): into its slot, or to its callback once the lock is
    /// released. (`Slabs::publish` after a run of these.)
    fn delivered(
        &mut self,
        core: &mut Core,
        id: RecordId,
        (topic, partition): (&Arc<str>, i32),
        offset: Option<i64>,
        log_append_time: Option<i64>,
        ack: Acknowledgement,
    ) {
        match core.pending.remove(id) {
            Some(Done::Future) => {
                (core.slabs).deliver(id.0, topic, partition, offset, log_append_time, ack);
            }
            Some(Done::Callback(c)) => {
                let outcome = Ok((Arc::clone(topic), partition, offset, log_append_time, ack));
                self.outbox.push((c, outcome));
            }
            None => {}
        }
    }

    /// Record `id`'s outcome, taken from `Core::pending` with `done`: into its slot, or to
    /// its callback once the lock is released. (`Slabs::publish` after a run of these.)
    fn resolve(&mut self, core: &mut Core, id: u64, done: Done, outcome: Outcome) {
        match done {
            Done::Future => core.slabs.resolve_whole(id, outcome),
            Done::Callback(c) => self.outbox.push((c, outcome)),
        }
    }

    fn finished(&self, core: &Core) -> bool {
        self.close_requested
            && self.deferred.is_empty()
            && core.pending.is_empty()
            && (core.producer.is_closed() || core.producer.fatal_error().is_some())
    }

    /// Carries out outputs until the core waits.
    fn drain(&mut self, core: &mut Core) {
        loop {
            match core.producer.poll_output() {
                Output::Transmit { conn, bytes } => {
                    if let Some(Conn::Open {
                        tx,
                        unwritten,
                        queued,
                        ..
                    }) = self.conns.get_mut(&conn)
                    {
                        // Counted before the writer can see them, so it never subtracts
                        // bytes that were not added.
                        let n = bytes.len();
                        if let Some(u) = unwritten {
                            u.fetch_add(n, Ordering::Relaxed);
                        }
                        if tx.send(bytes).is_err() {
                            if let Some(u) = unwritten {
                                u.fetch_sub(n, Ordering::Relaxed);
                            }
                        } else {
                            *queued += n as u64;
                        }
                    }
                }
                Output::Connect { conn, addr } => {
                    // No timer here: the core closes a connect it waited too long for.
                    let connector = self.connector.clone();
                    let target = addr.clone();
                    let task = self
                        .connecting
                        .spawn(async move { (conn, connector.connect(&target).await) });
                    self.conns.insert(conn, Conn::Connecting { task, addr });
                }
                Output::Close { conn, flush } => {
                    if flush {
                        // Closed in good order (the producer closed with every record
                        // resolved, or idle, with nothing left to write): under acks=0 the
                        // last requests may still be queued (their records already Sent), so
                        // the writer finishes what it holds (bounded by its stall timeout)
                        // and ends when the queue closes.
                        if let Some(Conn::Open {
                            writer,
                            reader,
                            closing,
                            unwritten,
                            ..
                        }) = self.conns.get_mut(&conn)
                        {
                            // Writers that are done are dropped here, so that a producer
                            // closing connections for idleness holds no growing list.
                            self.finishing.retain(|w| !w.is_finished());
                            // Every request of a connection closed in good order was
                            // answered, so the broker read them all, but acks=0 requests are
                            // not answered: only then the reader waits for the broker's end.
                            match (writer.take(), reader.take()) {
                                (Some(w), Some(r)) if self.write_backlog_limit.is_some() => {
                                    closing.store(true, Ordering::Relaxed);
                                    // A flush waits for what this writer still holds, until
                                    // it has written it or ended (its failure is reported,
                                    // which wakes the driver).
                                    // (`resolve_flushes` prunes the list at every turn.)
                                    if let Some(u) = unwritten {
                                        self.draining.push((conn, u.clone(), w.abort_handle()));
                                    }
                                    self.finishing.push(tokio::spawn(finish(w, r)));
                                }
                                (w, r) => {
                                    *reader = r;
                                    self.finishing.extend(w);
                                }
                            }
                        }
                    }
                    self.conns.remove(&conn);
                }
                Output::Event(event) => self.event(core, event),
                Output::SaslInput { conn, need } => {
                    let input = sasl::answer(need, self.token_provider.as_ref());
                    core.producer.handle_sasl_input(now(), conn, input);
                }
                Output::Wait { until } => {
                    self.deadline = until;
                    return;
                }
            }
        }
    }

    /// Record `id`, if still pending, failed as `kind`: into its slot, or to its callback once
    /// the lock is released.
    fn failed(
        &mut self,
        core: &mut Core,
        id: RecordId,
        kind: ErrorKind,
        persisted: Persistence,
        record: Option<Box<Record>>,
        detail: Option<Box<kprod_core::BrokerDetail>>,
    ) {
        if let Some(done) = core.pending.remove(id) {
            let error = DeliveryError {
                kind,
                persisted,
                record,
                detail,
            };
            self.resolve(core, id.0, done, Err(error));
            core.slabs.publish(&mut self.to_wake);
        }
    }

    fn event(&mut self, core: &mut Core, event: Event) {
        match event {
            Event::Delivered(d) => {
                let ack = if core.producer.config().acks == 1 {
                    Acknowledgement::Leader
                } else {
                    Acknowledgement::InSyncReplicas
                };
                for (id, offset) in d.records() {
                    let to = (&d.topic, d.partition);
                    self.delivered(core, id, to, offset, d.log_append_time, ack);
                }
                core.slabs.publish(&mut self.to_wake);
            }
            Event::Sent(s) => {
                let ack = Acknowledgement::Unacknowledged;
                for &id in &s.ids {
                    self.delivered(core, id, (&s.topic, s.partition), None, None, ack);
                }
                core.slabs.publish(&mut self.to_wake);
            }
            Event::Failed {
                id,
                error,
                persisted,
                record,
                detail,
            } => {
                let kind = match error {
                    // As `ProducerHandle::fatal` tells it (every bootstrap server's
                    // certificate rejected is a `ConnectionError`).
                    FailureReason::Fatal(e) => Fatal::from_core(e).kind(),
                    error => ErrorKind::Failed(error),
                };
                self.failed(core, id, kind, persisted, record, detail);
            }
            Event::Fatal(e) => {
                // The application's own abort is no failure to page anyone about (the docs
                // suggest it after a `close_timeout`; a review of what operators read).
                let aborted = matches!(&e, FatalError::Aborted { reason } if reason == ABORTED);
                self.to_log.push(if aborted {
                    Log::Aborted
                } else {
                    Log::ProducerFailed(e.to_string())
                });
                // Before the `Failed` events that follow it, so that a record's failure
                // never resolves before `ProducerHandle::fatal` shows the cause.
                let _ = self.fatal.set(Fatal::from_core(e));
            }
            // Logged once the lock is released (`deliver`).
            Event::Diagnostic(d) => self.to_log.push(Log::Diagnostic(d)),
        }
    }

    /// Applies an application command, or queues it behind a record waiting for memory.
    fn command(&mut self, core: &mut Core, cmd: Command) {
        let cmd = match cmd {
            // Never behind a record waiting for memory.
            Command::Metrics(tx) => {
                let m = (self.metrics_snapshot).get_or_insert_with(|| core.producer.metrics());
                let _ = tx.send(m.clone());
                return;
            }
            Command::PartitionCount { topic, since, tx } => {
                let deadline = since + core.producer.config().max_block;
                self.partition_waiters.push(PartitionWaiter {
                    topic,
                    deadline,
                    tx,
                });
                return;
            }
            cmd => cmd,
        };
        self.metrics_snapshot = None;
        if !self.deferred.is_empty()
            || (self.write_backlogged() && !core.producer.is_closed() && cmd.is_send())
        {
            // Behind a record waiting for memory, or for the writers to catch up (acks=0):
            // accepted in order once there is room, or refused at `max.block.ms`.
            self.defer(cmd);
        } else if let Some(cmd) = self.apply(core, cmd) {
            // Refused for lack of room, or a `SendMany` paused after a piece: at the front
            // now, and the pump after the commands goes on with it (pausing again there).
            self.paused_many = false;
            self.defer(cmd);
        }
    }

    /// Queues a command behind a record waiting for memory. A send whose caller gave up
    /// (a `timeout` or `select!` dropped its future) would keep its record here until memory
    /// frees, and an application retrying through a long outage would pile them up: so
    /// whenever the queue doubles, those are dropped.
    fn defer(&mut self, cmd: Command) {
        if self.deferred.is_empty() {
            // A new wait: an earlier peak does not put the next purge off.
            self.deferred_purge_at = DEFERRED_PURGE_FROM;
        }
        self.deferred_barriers += usize::from(!cmd.is_send());
        self.deferred.push_back(cmd);
        if self.deferred.len() >= self.deferred_purge_at {
            let before = self.deferred.len();
            self.deferred.retain(|c| !c.abandoned());
            self.deferred_purge_at = (2 * self.deferred.len()).max(DEFERRED_PURGE_FROM);
            // What is left is tried again at the next pump as if memory had been freed: the
            // sends purged may have been all that held a flush or close back (it waited for
            // memory to fall below the level of their refusal while new records, no longer
            // queued behind anything, kept it up; a review finding).
            if self.deferred.len() < before {
                self.refused_at = None;
            }
        }
    }

    /// Applies a command; hands a record refused for lack of memory back.
    fn apply(&mut self, core: &mut Core, cmd: Command) -> Option<Command> {
        match cmd {
            Command::Send {
                record,
                accepted,
                done,
                since,
                _ticket,
            } => {
                if accepted.is_closed() {
                    return None; // the caller gave up before the record was accepted
                }
                match core.offer(self.fatal.get(), now(), record, done) {
                    Verdict::Accepted(slot) => {
                        self.refused_at = None;
                        let _ = accepted.send(Ok(slot));
                    }
                    Verdict::Full(record, done) => {
                        self.refused_at = Some(held(core));
                        return Some(Command::Send {
                            record,
                            accepted,
                            done,
                            since,
                            _ticket,
                        });
                    }
                    Verdict::Refused(e) => {
                        let _ = accepted.send(Err(e));
                    }
                }
            }
            Command::SendMany {
                mut records,
                mut results,
                accepted,
                since,
                _ticket,
            } => {
                if accepted.is_closed() {
                    return None; // the caller gave up; the records not accepted yet are dropped
                }
                let at = now();
                let taken = results.len();
                let mut offered = 0;
                while let Some((record, done)) = records.pop_front() {
                    if offered == MANY_PER_LOCK {
                        // Enough under one hold of the lock (the handles' own pieces are as
                        // large): the rest after a pause, in its place.
                        records.push_front((record, done));
                        self.paused_many = true;
                        return Some(Command::SendMany {
                            records,
                            results,
                            accepted,
                            since: at,
                            _ticket,
                        });
                    }
                    offered += 1;
                    match core.offer(self.fatal.get(), at, record, done) {
                        Verdict::Accepted(slot) => {
                            self.refused_at = None;
                            results.push(Ok(slot));
                        }
                        Verdict::Full(record, done) => {
                            self.refused_at = Some(held(core));
                            records.push_front((record, done));
                            // Records taken now: the rest wait again from now.
                            let since = if results.len() > taken { at } else { since };
                            return Some(Command::SendMany {
                                records,
                                results,
                                accepted,
                                since,
                                _ticket,
                            });
                        }
                        Verdict::Refused(e) => results.push(Err(e)),
                    }
                }
                let _ = accepted.send(results);
            }
            Command::Flush(tx) => {
                core.producer.flush(now());
                self.flushes.push(Flush {
                    upto: core.producer.next_record_id(),
                    tx,
                    written: None,
                });
            }
            Command::Close(tx) => {
                core.producer.close(now());
                self.close_requested = true;
                // Callers that gave up (a `close_timeout` loop against a broker that does
                // not answer) are let go here, not only when the driver ends.
                self.closers.retain(|c| !c.is_closed());
                self.closers.extend(tx);
            }
            Command::Metrics(tx) => {
                let _ = tx.send(core.producer.metrics());
            }
            Command::PartitionCount { .. } => unreachable!("taken in `command`"),
        }
        None
    }

    /// Answers the [`ProducerHandle::partition_count`] calls that can be answered now (the
    /// count known, the topic refused, the producer stopped, `max.block.ms` passed) and asks
    /// again about the topics of the others (the core paces the requests).
    fn answer_partition_waiters(&mut self, core: &mut Core) {
        if self.partition_waiters.is_empty() {
            return;
        }
        let now = now();
        // The core's fatal error before this drain shows it (`Event::Fatal`).
        let fatal = (self.fatal.get().cloned())
            .or_else(|| (core.producer.fatal_error().cloned()).map(Fatal::from_core));
        let closing = self.close_requested;
        for w in std::mem::take(&mut self.partition_waiters) {
            let p = &mut core.producer;
            let topic = &w.topic;
            let answer = if w.tx.is_closed() {
                continue;
            } else if !is_valid_topic_name(topic) {
                Err(PartitionCountError::InvalidTopic(topic.clone()))
            } else if fatal.is_some() || closing {
                Err(stopped_error(fatal.as_ref()))
            } else if let Some(code) = p.topic_error(topic).filter(|c| c.refuses_the_topic()) {
                Err(PartitionCountError::Broker {
                    topic: topic.clone(),
                    code,
                })
            } else if !p.want_topic(now, topic) {
                Err(PartitionCountError::Closed)
            } else if let Some(n) = p.partition_count(topic) {
                Ok(n)
            } else if w.deadline <= now {
                Err(PartitionCountError::Timeout {
                    topic: topic.clone(),
                    after: p.config().max_block,
                    last_error: p.topic_error(topic),
                })
            } else {
                self.partition_waiters.push(w);
                continue;
            };
            let _ = w.tx.send(answer);
        }
    }

    /// When the first [`ProducerHandle::partition_count`] call still waiting times out.
    fn partition_deadline(&self) -> Option<Instant> {
        self.partition_waiters.iter().map(|w| w.deadline).min()
    }

    /// Whether the writers hold more unwritten bytes than `write_backlog_limit` allows
    /// (acks=0 only): then no record is accepted until a writer catches up (sends wait with
    /// those waiting for memory, up to `max.block.ms`).
    fn write_backlogged(&self) -> bool {
        self.write_backlog_limit
            .is_some_and(|limit| self.unwritten() > limit)
    }

    /// The bytes handed to the writers and not yet written (counted under acks=0 only).
    fn unwritten(&self) -> usize {
        (self.conns.values())
            .map(|c| match c {
                Conn::Open {
                    unwritten: Some(u), ..
                } => u.load(Ordering::Relaxed),
                Conn::Open { .. } | Conn::Connecting { .. } => 0,
            })
            .sum()
    }

    /// When the send at the front of the commands waiting for memory has waited
    /// `max.block.ms` (the driver wakes then to refuse it).
    fn block_deadline(&self, max_block: Duration) -> Option<Instant> {
        let front = self.deferred.front()?.expiry(max_block);
        let behind = self
            .first_send_behind_front()
            .and_then(|i| self.deferred[i].expiry(max_block));
        front.into_iter().chain(behind).min()
    }

    /// The first send behind the front of `deferred`. The sends behind the front are in the
    /// order of their `since` (each joined the back when handed over, or when an
    /// `enqueue_many` went behind the others to take turns), so it is the next to expire
    /// among them; only the front's wait can have started again later (an `enqueue_many`
    /// that had records taken while a flush or close waits behind it keeps its place).
    fn first_send_behind_front(&self) -> Option<usize> {
        (1..self.deferred.len()).find(|&i| self.deferred[i].is_send())
    }

    /// Hands the core up to `n` of what the readers and writers queued, without waiting.
    fn take_reads(
        &mut self,
        core: &mut Core,
        io_rx: &mut mpsc::Receiver<(ConnId, ReadResult)>,
        n: usize,
    ) {
        for _ in 0..n {
            let Ok((conn, r)) = io_rx.try_recv() else {
                break;
            };
            self.io(core, conn, r);
        }
    }

    /// Refuses the sends at the front of the commands waiting for memory that have waited
    /// `max.block.ms` since the application handed them over (or, for an `enqueue_many`,
    /// since one of its records was last accepted), as the Java client's `send` throws once
    /// it has blocked that long: `Refused(QueueFull)`, not persisted, the record handed back
    /// (every record of an `enqueue_many` still waiting). The commands behind them are tried
    /// again. A send behind the front that has waited that long is refused too (the front
    /// may be an `enqueue_many` whose wait started again, or a flush). Whether it refused
    /// any.
    fn expire_deferred(&mut self, core: &mut Core) -> bool {
        let max_block = core.producer.config().max_block;
        let now = now();
        let mut any = false;
        loop {
            let expired = |c: &Command| c.expiry(max_block).is_some_and(|at| at <= now);
            let at = if self.deferred.front().is_some_and(expired) {
                0
            } else {
                match self.first_send_behind_front() {
                    Some(i) if expired(&self.deferred[i]) => i,
                    _ => return any,
                }
            };
            any = true;
            match self.deferred.remove(at) {
                Some(Command::Send {
                    record, accepted, ..
                }) => {
                    let _ = accepted.send(Err(refused(SendError::QueueFull(record))));
                }
                Some(Command::SendMany {
                    records,
                    mut results,
                    accepted,
                    ..
                }) => {
                    let full = |(record, _)| Err(refused(SendError::QueueFull(record)));
                    results.extend(records.into_iter().map(full));
                    let _ = accepted.send(results);
                }
                Some(_) | None => unreachable!("only sends expire"),
            }
            // Whatever is behind is tried again (a flush or close goes ahead at once).
            self.refused_at = None;
        }
    }

    /// Retries deferred commands in order once memory was freed.
    fn pump_deferred(&mut self, core: &mut Core) {
        while let Some(cmd) = self.deferred.pop_front() {
            // A send whose caller gave up holds nothing back: it goes (its ticket with it),
            // and what waited behind it is tried as if memory had been freed, its refusal
            // having been that record's. Before, a later record that fit waited behind it
            // until memory was freed or its `max.block.ms` passed (a review finding).
            if cmd.abandoned() {
                self.refused_at = None;
                continue;
            }
            // While the writers are backed up (acks=0) no record is taken; a flush or close
            // at the front goes ahead, and the sends behind it still expire.
            if cmd.is_send() && self.write_backlogged() {
                self.deferred.push_front(cmd);
                return;
            }
            // Room may have come from fewer bytes (`buffer.memory`) or fewer records
            // (`queue.buffering.max.messages`); the bytes held can grow meanwhile (records
            // that waited for metadata take their batch's room), so either drop counts.
            let freed = match self.refused_at {
                Some((bytes, records)) => {
                    let (b, r) = held(core);
                    b < bytes || r < records || core.producer.fatal_error().is_some()
                }
                None => true,
            };
            if !freed {
                self.deferred.push_front(cmd);
                return;
            }
            self.deferred_barriers -= usize::from(!cmd.is_send());
            let waiting = cmd.waiting();
            if let Some(cmd) = self.apply(core, cmd) {
                if std::mem::take(&mut self.paused_many) {
                    // Not refused: it stopped to let go of the lock. It keeps its place and
                    // goes on at the next wake-up, which is asked for now.
                    self.deferred.push_front(cmd);
                    self.drain(core);
                    if !core.notified {
                        core.notified = true;
                        self.shared.wake.notify_one();
                    }
                    return;
                }
                // Refused again: the refusal made what is buffered sendable, and with acks=0
                // the drain hands it over and frees its memory at once (no answer, no timer
                // will come to retry), so the loop checks for freed memory again; if the
                // drain freed nothing it stops.
                //
                // An `enqueue_many` that had some of its records taken (its wait starting
                // again from now: `apply`) goes behind the other sends waiting: the next
                // memory freed goes to them first, as it would if each record had been handed
                // over on its own. (Taking turns, several callers' partitions fill batches
                // side by side and share requests; one call at a time, each request carried
                // about one batch of the one partition whose records took all the memory
                // freed: a load probe, 16 callers each of one key, a third less throughput
                // than per-record sends.)
                // Never past a flush or close waiting behind it, which must come after it:
                // then it keeps its place (the sends behind it still expire on their own).
                if cmd.waiting() < waiting && self.deferred_barriers == 0 {
                    self.deferred.push_back(cmd);
                } else {
                    self.deferred.push_front(cmd);
                }
            }
            self.drain(core);
        }
        // Emptied: the room of a crowd of senders that waited for memory (one entry each) is
        // given back (a review of the day's diff).
        if self.deferred.capacity() > 64 {
            self.deferred.shrink_to_fit();
        }
    }

    /// Resolves the flushes no pending record is below; `lowest` is the first pending one.
    fn resolve_flushes(&mut self, lowest: Option<RecordId>) {
        // Under acks=0 a record resolves when its request is handed to a writer: a flush
        // also waits for the writers to write it (a review finding: it resolved while the
        // bytes still sat in the driver, so `flush()` then an abort or a process exit lost
        // records reported sent). Once its records are handed over, each connection is to
        // write what it then held (bytes handed over later do not hold it back: a review of
        // the first version, which waited for every writer to be empty at once, and never
        // returned under steady traffic). The driver wakes as writes complete (`written`).
        let acks_zero = self.write_backlog_limit.is_some();
        // A writer closing in good order has written all it will once it is empty or ended.
        self.draining
            .retain(|(_, u, task)| u.load(Ordering::Relaxed) > 0 && !task.is_finished());
        let (conns, draining, flushes) = (&self.conns, &self.draining, &mut self.flushes);
        let mut i = 0;
        while i < flushes.len() {
            // A caller that gave up (`flush_timeout`) is forgotten too: a harness flushing
            // with a short timeout through a long outage left one entry per call, each
            // scanned on every wake-up until the records resolved.
            let f = &mut flushes[i];
            let resolved = lowest.is_none_or(|l| l >= f.upto);
            let done = f.tx.is_closed()
                || resolved
                    && (!acks_zero || {
                        let targets = f.written.get_or_insert_with(|| {
                            (conns.iter())
                                .filter_map(|(c, conn)| match conn {
                                    Conn::Open {
                                        unwritten: Some(_),
                                        queued,
                                        ..
                                    } => Some((*c, *queued)),
                                    _ => None,
                                })
                                // And the writers already finishing what they hold (closed in
                                // good order before the snapshot: a review finding).
                                .chain(draining.iter().map(|d| (d.0, 0)))
                                .collect()
                        });
                        // A connection gone has written, or lost, all it will, unless its
                        // writer is still finishing what it holds.
                        targets.iter().all(|(c, target)| match conns.get(c) {
                            Some(Conn::Open {
                                unwritten: Some(u),
                                queued,
                                ..
                            }) => queued - u.load(Ordering::Relaxed) as u64 >= *target,
                            _ => !draining.iter().any(|d| d.0 == *c),
                        })
                    });
            if done {
                let _ = flushes.swap_remove(i).tx.send(());
            } else {
                i += 1;
            }
        }
    }

    fn io(&mut self, core: &mut Core, conn: ConnId, r: ReadResult) {
        match r {
            ReadResult::Data(chunk) => {
                if let Some(Conn::Open { buf, .. }) = self.conns.get_mut(&conn) {
                    if buf.is_empty() {
                        *buf = chunk;
                    } else {
                        buf.extend_from_slice(&chunk);
                    }
                    core.producer.handle_read(now(), conn, buf);
                }
            }
            ReadResult::Closed => {
                if let Some(Conn::Open { .. }) = self.conns.get(&conn) {
                    self.conns.remove(&conn);
                    core.producer.handle_disconnected(now(), conn);
                }
            }
            ReadResult::Writing { since } => {
                if let Some(Conn::Open { .. }) = self.conns.get(&conn) {
                    core.producer.handle_writing(now(), conn, since);
                }
            }
            ReadResult::Failed(e) => {
                let Some(addr) = (self.conns.get(&conn))
                    .filter(|c| matches!(c, Conn::Open { .. }))
                    .map(|c| c.addr().clone())
                else {
                    return;
                };
                self.conn_failed(core, conn, addr, &e, false);
            }
        }
    }

    /// Connection `conn` to `addr` failed with `e`, while `connecting` or once open: a
    /// certificate rejected (by either side) goes to the core as a refusal, which decides
    /// whether that is this connection's failure or the producer's; anything else as a
    /// failed connect or a lost connection. Logged once the lock is released.
    fn conn_failed(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        addr: Arc<str>,
        e: &io::Error,
        connecting: bool,
    ) {
        self.conns.remove(&conn);
        if let Some(reason) = self.fatal_reason(e) {
            let log = Log::Refused {
                conn,
                addr,
                reason: reason.clone(),
            };
            self.to_log.push(log);
            core.producer.handle_connection_refused(now(), conn, reason);
            return;
        }
        let error = e.to_string();
        self.to_log.push(Log::Failed {
            conn,
            addr,
            error,
            connecting,
        });
        if connecting {
            core.producer.handle_connect_failed(now(), conn);
        } else {
            core.producer.handle_disconnected(now(), conn);
        }
    }

    /// [`Connector::fatal_reason`], application code run on the driver's task: a panic in
    /// it is taken for `None` (an ordinary failure, retried), not let through to end the
    /// driver and fail every record `DriverStopped` (review finding, 2026-12-06).
    fn fatal_reason(&mut self, e: &io::Error) -> Option<String> {
        let connector = &self.connector;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| connector.fatal_reason(e)))
            .unwrap_or_else(|_| {
                self.to_log.push(Log::FatalReasonPanicked(e.to_string()));
                None
            })
    }

    fn connect_done(
        &mut self,
        core: &mut Core,
        r: Result<(ConnId, io::Result<C::Stream>), JoinError>,
    ) {
        let (conn, result) = match r {
            Ok(r) => r,
            Err(e) if e.is_cancelled() => return,
            Err(e) => {
                // The connector panicked: report it as a failed connect.
                let found = self.conns.iter().find_map(|(c, s)| match s {
                    Conn::Connecting { task, .. } if task.id() == e.id() => Some(*c),
                    _ => None,
                });
                let Some(conn) = found else { return };
                (conn, Err(io::Error::other(e.to_string())))
            }
        };
        let addr = match self.conns.get(&conn) {
            Some(c @ Conn::Connecting { .. }) => c.addr().clone(),
            _ => return, // closed while connecting
        };
        match result {
            Ok(stream) => {
                let open = self.spawn_io(conn, stream, addr);
                self.conns.insert(conn, open);
                core.producer.handle_connected(now(), conn);
            }
            Err(e) => self.conn_failed(core, conn, addr, &e, true),
        }
    }

    /// Starts the reader and writer of a connection; they only move bytes.
    fn spawn_io(&self, conn: ConnId, stream: C::Stream, addr: Arc<str>) -> Conn {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let io_tx = self.io_tx.clone();
        let closing = Arc::new(AtomicBool::new(false));
        let discard = Arc::clone(&closing);
        let reader = spawn_failing_on_panic(conn, self.io_tx.clone(), async move {
            let mut buf = BytesMut::new();
            loop {
                // A new block only when the current one has little room left: each read's
                // bytes are split off (handed to the driver) and share the block, so
                // reserving a whole chunk every time took a fresh 64 KiB block per read,
                // however small (a review finding: a 100-byte answer, a trickling peer).
                if buf.capacity() < READ_CHUNK / 4 {
                    buf.reserve(READ_CHUNK);
                }
                match rd.read_buf(&mut buf).await {
                    Ok(0) => break,
                    // Closing in good order: nothing more is for the producer.
                    Ok(_) if discard.load(Ordering::Relaxed) => buf.clear(),
                    Ok(_) => {
                        if io_tx
                            .send((conn, ReadResult::Data(buf.split())))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) => {
                        debug!(conn = conn.0, error = %e, "read failed");
                        let _ = io_tx.send((conn, ReadResult::Failed(e))).await;
                        return;
                    }
                }
            }
            let _ = io_tx.send((conn, ReadResult::Closed)).await;
        });
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let io_tx = self.io_tx.clone();
        // The backlog is counted only where it is bounded (acks=0): two atomic operations
        // per write saved otherwise.
        let unwritten = (self.write_backlog_limit.is_some()).then(|| Arc::new(AtomicUsize::new(0)));
        let (count, written) = (unwritten.clone(), Arc::clone(&self.written));
        let stall = self.write_stall;
        let mut progress = WriteProgress::new(conn, self.io_tx.clone());
        let writer = spawn_failing_on_panic(conn, self.io_tx.clone(), async move {
            // A request arrives as several chunks (its record batches are not copied by the
            // core): gather everything queued and hand it to the socket in vectored writes.
            let mut queued: Vec<Bytes> = Vec::new();
            while rx.recv_many(&mut queued, 256).await > 0 {
                progress.busy();
                let n: usize = queued.iter().map(Bytes::len).sum();
                let result =
                    write_all_vectored(&mut wr, &mut queued, stall, Some(&mut progress)).await;
                // Written, or lost with the connection: either way no longer queued.
                if let Some(count) = &count {
                    count.fetch_sub(n, Ordering::Relaxed);
                    written.notify_one();
                }
                if result.is_ok() && rx.is_empty() {
                    progress.idle().await;
                }
                if let Err(e) = result {
                    debug!(conn = conn.0, error = %e, "write failed");
                    // Nothing more is taken: what the core hands over meanwhile is refused
                    // at once rather than counted as queued, and what was queued is lost
                    // with the connection, so no longer counted (a review finding).
                    rx.close();
                    while let Ok(lost) = rx.try_recv() {
                        if let Some(count) = &count {
                            count.fetch_sub(lost.len(), Ordering::Relaxed);
                        }
                    }
                    drop(rx);
                    let _ = io_tx.send((conn, ReadResult::Failed(e))).await;
                    return;
                }
            }
            // The queue closed: the connection closes in good order. Say so to the broker
            // (FIN, after TLS's close_notify), which then reads to the end of what was sent.
            let shutdown = wr.shutdown();
            let _ = match stall {
                Some(d) => tokio::time::timeout(d, shutdown).await.unwrap_or(Ok(())),
                None => shutdown.await,
            };
        });
        Conn::Open {
            tx,
            unwritten,
            queued: 0,
            reader: Some(reader),
            closing,
            writer: Some(writer),
            buf: BytesMut::new(),
            addr,
        }
    }
}

/// A `flush()` waiting: for the records before `upto` to resolve, and under acks=0 for each
/// connection to have written what it held once they had (`written`: per connection, the
/// bytes then handed over in all).
struct Flush {
    upto: RecordId,
    tx: oneshot::Sender<()>,
    written: Option<Vec<(ConnId, u64)>>,
}

/// Whether `e` is a record's failure for the core's abort ([`Producer::abort`]), as opposed
/// to one the core had decided before.
fn aborted(e: &Event) -> bool {
    matches!(
        e,
        Event::Failed {
            error: kprod_core::DeliveryError::Fatal(FatalError::Aborted { .. }),
            ..
        }
    )
}

/// Spawns a connection's reader or writer. A panic in it (in a custom [`Connector`]'s
/// stream) fails the connection, as a read error does: before, the task ended without a
/// word and the connection stayed open and dead, its requests waiting for
/// `request.timeout.ms`, and under `acks=0` every later record reported sent while nothing
/// reached the broker (a review finding). The panic is caught as a connector's is.
fn spawn_failing_on_panic(
    conn: ConnId,
    io_tx: mpsc::Sender<(ConnId, ReadResult)>,
    task: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if (CatchPanic(Box::pin(task))).await {
            let e = io::Error::other("the connection's stream panicked");
            let _ = io_tx.send((conn, ReadResult::Failed(e))).await;
        }
    })
}

/// A future that ends with `true` if polling the inner one panicked.
struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future<Output = ()>> Future for CatchPanic<F> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(())) => Poll::Ready(false),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(true),
        }
    }
}

/// A log event the driver took while it held the core's lock, written once it let go
/// ([`Driver::deliver`]): a slow log writer then holds up the driver alone, not every
/// `enqueue` waiting for the lock.
enum Log {
    Diagnostic(Diagnostic),
    /// A connect (`connecting`) or an open connection failed.
    Failed {
        conn: ConnId,
        addr: Arc<str>,
        error: String,
        connecting: bool,
    },
    /// A connection refused for a reason the connector takes as fatal (a certificate).
    Refused {
        conn: ConnId,
        addr: Arc<str>,
        reason: String,
    },
    ProducerFailed(String),
    /// The application called [`ProducerHandle::abort`].
    Aborted,
    /// The wall clock jumped ahead of the monotonic one (`ClockWatch`).
    ClockJumped(Duration),
    FatalReasonPanicked(String),
}

impl Log {
    fn write(self) {
        match self {
            Self::Diagnostic(d) => log_diagnostic(d),
            Self::Failed {
                conn,
                addr,
                error,
                connecting: true,
                // At WARN, as the Java client logs it ("could not be established"): a broker
                // advertised under an address that does not resolve or connect from here (a
                // VPC-only name, a container's `advertised.listeners`) said nothing at the usual
                // level until records timed out, naming no address (a review of deployments).
                // Paced by `reconnect.backoff.ms` per address. (The TLS handshake is part of the
                // connect: a plaintext listener closes it.)
            } => warn!(
                conn = conn.0,
                addr = %addr,
                %error,
                "connect failed (broker down? its address, from bootstrap.servers or the \
                 broker's advertised.listeners, unreachable from here? DNS? a TLS handshake \
                 with a listener that is not TLS: security.protocol?)"
            ),
            Self::Failed {
                conn, addr, error, ..
            } => info!(conn = conn.0, addr = %addr, %error, "connection failed"),
            Self::Refused { conn, addr, reason } => {
                debug!(conn = conn.0, addr = %addr, %reason, "connection refused");
            }
            Self::ProducerFailed(error) => error!(%error, "producer failed"),
            Self::Aborted => info!("producer aborted by the application (ProducerHandle::abort)"),
            Self::ClockJumped(by) => info!(
                ?by,
                "the wall clock jumped ahead (a suspend?): partitions idle past the \
                 producer-state expiry start with a probe"
            ),
            Self::FatalReasonPanicked(error) => warn!(
                %error,
                "the connector's fatal_reason panicked: taken for a retriable failure"
            ),
        }
    }
}

/// A diagnostic as a log event (outside the core's lock).
fn log_diagnostic(d: Diagnostic) {
    match d {
        Diagnostic::Connected {
            conn,
            addr,
            versions,
        } => info!(conn = conn.0, %addr, %versions, "connected"),
        // Closing an idle connection is routine (connections.max.idle.ms).
        Diagnostic::Disconnected {
            conn,
            addr,
            node,
            reason: Diagnostic::IDLE_CLOSE,
        } => debug!(conn = conn.0, %addr, ?node, "closed an idle connection"),
        // A failed connect was logged at WARN with its address and error (`Log::Failed`).
        Diagnostic::Disconnected {
            conn,
            addr,
            node,
            reason,
        } if reason == Diagnostic::CONNECT_FAILED => {
            debug!(conn = conn.0, %addr, ?node, reason, "disconnected");
        }
        Diagnostic::Disconnected {
            conn,
            addr,
            node,
            reason,
        } => {
            info!(conn = conn.0, %addr, ?node, reason, "disconnected");
        }
        Diagnostic::HandshakeFailed { conn, addr, error } => {
            warn!(conn = conn.0, %addr, %error, "handshake failed; will retry");
        }
        Diagnostic::Authenticated {
            conn,
            mechanism,
            reauthentication,
            session_lifetime_ms,
        } => {
            let what = if reauthentication {
                "re-authenticated"
            } else {
                "authenticated"
            };
            info!(conn = conn.0, mechanism, session_lifetime_ms, "{what}");
        }
        Diagnostic::Retry {
            topic,
            partition,
            batch,
            error,
        } => {
            info!(target: "kprod_tokio::batch", %topic, partition, batch, %error, "batch retry")
        }
        Diagnostic::BatchSent {
            topic,
            partition,
            batch,
            identity,
            base_sequence,
            records,
            bytes,
            conn,
            attempt,
        } => debug!(
            target: "kprod_tokio::batch",
            %topic,
            partition,
            batch,
            producer_id = identity.map_or(-1, |i| i.producer_id),
            epoch = identity.map_or(-1, |i| i.epoch),
            base_sequence,
            records,
            bytes,
            conn = conn.0,
            attempt,
            "batch sent"
        ),
        Diagnostic::BatchAcked {
            topic,
            partition,
            batch,
            base_offset,
            records,
        } => debug!(
            target: "kprod_tokio::batch",
            %topic,
            partition,
            batch,
            base_offset = base_offset.unwrap_or(-1),
            records,
            "batch acknowledged"
        ),
        Diagnostic::BatchFailed {
            topic,
            partition,
            batch,
            records,
            error,
            persisted,
        } => debug!(
            target: "kprod_tokio::batch",
            %topic,
            partition,
            batch,
            records,
            %error,
            ?persisted,
            "batch failed"
        ),
        Diagnostic::EpochBumped(id) => {
            info!(
                producer_id = id.producer_id,
                epoch = id.epoch,
                "epoch bumped"
            );
        }
        Diagnostic::ProducerId(id) => {
            info!(
                producer_id = id.producer_id,
                epoch = id.epoch,
                "producer id"
            );
        }
        Diagnostic::DataLoss { topic, partition } => {
            error!(%topic, partition, "broker lost acknowledged records");
        }
        other => debug!(?other, "diagnostic"),
    }
}

/// How long a connection closed in good order waits, once its last bytes are written, for
/// the broker to close its side.
const CLOSE_LINGER: Duration = Duration::from_secs(5);

/// Ends a connection closed in good order under acks=0: its writer writes what it holds and
/// shuts the socket's sending side, then the reader reads (discarding) until the broker
/// closes its side, for at most [`CLOSE_LINGER`]. Closing the socket with answers unread
/// would make the kernel reset the connection, and a reset drops the requests the broker has
/// not read yet: Tansu answers even acks=0 requests, and lost the last ones of a `close()` so
/// (a user probe: 826 of 3,000 records in the log). Aborted (with this task), the reader
/// stops.
async fn finish(writer: tokio::task::JoinHandle<()>, reader: tokio::task::JoinHandle<()>) {
    struct AbortOnDrop(AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _reader_guard = AbortOnDrop(reader.abort_handle());
    let _writer_guard = AbortOnDrop(writer.abort_handle());
    let _ = writer.await;
    let _ = tokio::time::timeout(CLOSE_LINGER, reader).await;
}

/// How far a connection's writer has got, for the core's request timeouts
/// (`Producer::handle_writing`): a request queued behind others on a link slower than what
/// is queued has its `request.timeout.ms` run from when the writer reaches it. Reported once
/// the writer has been busy [`WRITE_REPORT_EVERY`] without a break, then at that pace, and
/// when it runs out of work after such a report: on a link that keeps up, never, or (kept
/// busy without a break) once a second.
///
/// A report names where the last write began: the bytes of one write are taken by the
/// socket at once when it returns (it waits for room before taking any), so a request
/// beginning after that point was reached when it returned, or not yet. One that began
/// before was reached at an earlier write, less than [`WRITE_REPORT_EVERY`] after the
/// previous report, which already counted it as waiting: its time runs from then, never
/// from a later write that waited long (a review finding: reporting from the previous
/// report's point gave a request written just after it the time of a write that waited
/// 20 s behind it).
struct WriteProgress {
    conn: ConnId,
    io_tx: mpsc::Sender<(ConnId, ReadResult)>,
    /// Bytes written in all.
    total: u64,
    /// Where the last write began.
    last_write: u64,
    /// When the writer last reported, or found work after having none.
    reported_at: Instant,
    /// Reported since the writer last ran out of work: the end of the stretch is reported
    /// too.
    reported: bool,
    /// No work since the last write.
    idle: bool,
}

impl WriteProgress {
    fn new(conn: ConnId, io_tx: mpsc::Sender<(ConnId, ReadResult)>) -> Self {
        Self {
            conn,
            io_tx,
            total: 0,
            last_write: 0,
            reported_at: now(),
            reported: false,
            idle: true,
        }
    }

    /// The writer took work.
    fn busy(&mut self) {
        if self.idle {
            self.idle = false;
            self.reported_at = now();
        }
    }

    /// A report naming where the last write began.
    fn report(&self) -> (ConnId, ReadResult) {
        let since = self.last_write;
        (self.conn, ReadResult::Writing { since })
    }

    /// A write took `n` more bytes.
    fn wrote(&mut self, n: usize) {
        self.last_write = self.total;
        self.total += n as u64;
        // The driver's clock (tokio's, which tests pause), not `Instant::elapsed`.
        if now().saturating_duration_since(self.reported_at) >= WRITE_REPORT_EVERY {
            // Not awaited: with the queue full (a driver behind, its readers' answers
            // waiting) the writer waited there and wrote nothing while its requests'
            // timeouts ran (a review finding). A report that does not fit goes at a later
            // write: each names where the last write began.
            match self.io_tx.try_send(self.report()) {
                Ok(()) => {
                    self.reported_at = now();
                    self.reported = true;
                }
                Err(mpsc::error::TrySendError::Full(_)) => {}
                // A driver gone has no use for it.
                Err(mpsc::error::TrySendError::Closed(_)) => self.reported_at = now(),
            }
        }
    }

    /// The writer wrote all it held and has nothing more: the end of a stretch it reported
    /// in is reported too (awaited: there is nothing to write meanwhile).
    async fn idle(&mut self) {
        if self.reported {
            // A driver gone has no use for it.
            let _ = self.io_tx.send(self.report()).await;
        }
        self.reported = false;
        self.idle = true;
    }
}

/// Writes every chunk, in order, with as few vectored writes as the socket allows, then
/// flushes; empties `chunks`. With `stall`, a write (or the flush) that makes no progress for
/// that long fails (`TimedOut`).
///
/// The flush matters over TLS: tokio-rustls takes the plaintext, reports it written, and may
/// keep encrypted bytes it could not yet hand to a full socket until the next write or a
/// flush. Without the flush, the end of the last request of a burst could wait there until
/// `request.timeout.ms` closed the connection. On a plain TCP stream it does nothing.
///
/// With `progress`, each write's bytes are counted there, which reports how far the writer got
/// on a slow link ([`WriteProgress`]).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    chunks: &mut Vec<Bytes>,
    stall: Option<Duration>,
    mut progress: Option<&mut WriteProgress>,
) -> io::Result<()> {
    async fn bounded<T>(
        stall: Option<Duration>,
        op: impl Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        match stall {
            None => op.await,
            Some(d) => tokio::time::timeout(d, op).await.map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the broker read nothing for request.timeout.ms",
                )
            })?,
        }
    }
    let mut first = 0;
    loop {
        // Empty chunks are skipped before each write: a write of nothing alone returns 0,
        // which would read as a broken connection (a review finding: the writer took a
        // Produce request's empty last chunk alone from its queue and closed a healthy
        // connection).
        while first < chunks.len() && chunks[first].is_empty() {
            first += 1;
        }
        if first == chunks.len() {
            break;
        }
        let slices: Vec<io::IoSlice<'_>> = chunks[first..]
            .iter()
            .take(64)
            .map(|c| io::IoSlice::new(c))
            .collect();
        let mut n = bounded(stall, w.write_vectored(&slices)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        if let Some(p) = progress.as_deref_mut() {
            p.wrote(n);
        }
        while n > 0 {
            let c = &mut chunks[first];
            if n >= c.len() {
                n -= c.len();
                first += 1;
            } else {
                bytes::Buf::advance(c, n);
                n = 0;
            }
        }
    }
    chunks.clear();
    bounded(stall, w.flush()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review finding (2026-12-07, a starved driver): a writer due to report its progress
    /// waited for room in the queue it shares with the readers, and wrote nothing meanwhile.
    /// Now a report that does not fit goes at a later write (`wrote` no longer waits), and
    /// names where that write began.
    #[tokio::test(start_paused = true)]
    async fn a_full_queue_does_not_hold_a_writer_up() {
        let (tx, mut rx) = mpsc::channel(1);
        tx.try_send((ConnId(9), ReadResult::Writing { since: 0 }))
            .unwrap();
        let mut p = WriteProgress::new(ConnId(1), tx);
        p.busy();
        tokio::time::advance(WRITE_REPORT_EVERY * 2).await;
        p.wrote(10);
        p.wrote(20);
        // The queue still holds what filled it; nothing of this writer's.
        assert!(matches!(rx.try_recv(), Ok((ConnId(9), _))));
        assert!(rx.try_recv().is_err());
        p.wrote(5);
        match rx.try_recv() {
            Ok((ConnId(1), ReadResult::Writing { since })) => assert_eq!(since, 30),
            other => panic!("a report of conn 1: {:?}", other.map(|(c, _)| c)),
        }
        // Then a second later at the earliest.
        p.wrote(5);
        assert!(rx.try_recv().is_err());
    }

    /// A timestamp from the monotonic clock matches the wall clock read around it, before and
    /// after the offset is taken again.
    #[test]
    fn record_timestamps_follow_the_wall_clock() {
        let base = Instant::now();
        let clock = WallClock::new(base);
        // The offset is taken a moment after its instant (`base` here): until it is taken
        // again, a timestamp may read up to that moment ahead (at most `lag`, in whole ms).
        let mut lag = i64::try_from(base.elapsed().as_millis()).unwrap() + 1;
        for ahead in [Duration::ZERO, Duration::ZERO, WallClock::REANCHOR * 3] {
            let before = wall_clock_ns() / 1_000_000;
            let at = Instant::now() + ahead;
            let ms = clock.ms_at(at);
            let after = wall_clock_ns() / 1_000_000;
            // The last instant lies 300 ms ahead of the clock: it is taken as now.
            assert!(
                before - 1 <= ms && ms <= after + lag,
                "{before} <= {ms} <= {after} + {lag}"
            );
            // If this call took the offset again (a slow step), it read the wall clock up to
            // this long after `at`: later timestamps may read that much ahead.
            lag = lag.max(after - before + 1);
        }
        // Within REANCHOR the offset stands: an instant 50 ms on reads 50 ms on.
        let at = Instant::now();
        let ms = clock.ms_at(at);
        let later = clock.ms_at(at + Duration::from_millis(50));
        assert!((49..=51).contains(&(later - ms)), "{ms} then {later}");
        // A wall clock stepped by a second shows once the offset is taken again.
        clock.offset_ns.fetch_add(1_000_000_000, Ordering::Relaxed);
        let stepped = clock.ms_at(at);
        assert!(stepped >= ms + 999, "{ms} then {stepped}");
        let before = wall_clock_ns() / 1_000_000;
        let fresh = clock.ms_at(at + WallClock::REANCHOR * 2);
        let after = wall_clock_ns() / 1_000_000;
        assert!(
            before - 1 <= fresh && fresh <= after + 1,
            "re-anchored {fresh}, wall {before} to {after}"
        );
    }

    #[test]
    fn pending_resolves_out_of_order_and_reports_the_lowest_unresolved_id() {
        let mut p = Pending::default();
        assert!(p.is_empty());
        assert_eq!(p.first(), None);
        for i in 0..5 {
            p.insert(RecordId(10 + i), Done::Future);
        }
        assert_eq!(p.first(), Some(RecordId(10)));
        assert!(p.remove(RecordId(12)).is_some());
        assert!(p.remove(RecordId(12)).is_none(), "resolved once");
        assert_eq!(p.first(), Some(RecordId(10)));
        assert!(p.remove(RecordId(10)).is_some());
        assert_eq!(p.first(), Some(RecordId(11)));
        assert!(p.remove(RecordId(11)).is_some());
        assert_eq!(p.first(), Some(RecordId(13)), "skips the resolved 12");
        assert!(p.remove(RecordId(9)).is_none());
        assert!(p.remove(RecordId(99)).is_none());
        assert!(p.remove(RecordId(14)).is_some());
        assert!(p.remove(RecordId(13)).is_some());
        assert!(p.is_empty());
        assert_eq!(p.first(), None);
        // Empty again: the next id starts a new run.
        p.insert(RecordId(20), Done::Future);
        assert_eq!(p.first(), Some(RecordId(20)));
        assert!(!p.is_empty());
    }

    /// What a stopped producer still holds is reported lowest id first, stragglers (moved
    /// aside by compaction) before the slots: records 0 and 1 unresolved while 2..1,050
    /// resolved, then the rest dropped: each callback says "stopped", in id order.
    #[test]
    fn pending_reports_what_is_left_lowest_id_first() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut p = Pending::default();
        for id in 0..1_100u64 {
            let o = order.clone();
            let mut done = Done::Callback(Callback::new(Box::new(move |r| {
                assert!(matches!(r, Err(ref e) if matches!(e.kind, ErrorKind::DriverStopped)));
                o.lock().unwrap().push(id);
            })));
            done.arm(1);
            p.insert(RecordId(id), done);
        }
        for id in 2..1_050u64 {
            let Some(Done::Callback(mut c)) = p.remove(RecordId(id)) else {
                panic!("record {id} is pending");
            };
            c.timestamp = Callback::UNARMED; // resolved elsewhere: not called here
        }
        assert!(!p.stragglers.is_empty(), "compaction moved 0 and 1 aside");
        for (_, done) in p.into_ordered() {
            drop(done);
        }
        let order = order.lock().unwrap();
        let expected: Vec<u64> = [0, 1].into_iter().chain(1_050..1_100).collect();
        assert_eq!(*order, expected);
    }

    /// Two records unresolved at the front while 100,000 later ones resolve: the slots stay
    /// few (before, one per later id), and both stragglers still resolve, lowest first.
    #[test]
    fn pending_stays_small_behind_a_few_unresolved_records() {
        let mut p = Pending::default();
        for id in 0..100_002u64 {
            p.insert(RecordId(id), Done::Future);
            // Records 0 and 1 stay unresolved; each later one resolves soon after it is sent.
            if id >= 10 {
                assert!(p.remove(RecordId(id - 8)).is_some());
            }
            assert!(
                p.slots.len() <= 2 * Pending::COMPACT_FROM,
                "{} slots",
                p.slots.len()
            );
        }
        assert_eq!(p.len(), 10);
        assert_eq!(p.first(), Some(RecordId(0)));
        assert!(p.slots.capacity() <= 8 * Pending::COMPACT_FROM);
        assert!(p.remove(RecordId(0)).is_some());
        assert_eq!(p.first(), Some(RecordId(1)));
        assert!(p.remove(RecordId(0)).is_none(), "resolved once");
        assert!(p.remove(RecordId(1)).is_some());
        assert_eq!(p.first(), Some(RecordId(100_002 - 8)));
        for id in 100_002 - 8..100_002 {
            assert!(p.remove(RecordId(id)).is_some());
        }
        assert!(p.is_empty());
        assert_eq!(p.first(), None);
    }

    /// A suspend shows as wall-clock time the monotonic clock did not count; drift, slewing
    /// and a step back do not.
    #[test]
    fn the_clock_watch_sees_a_suspend() {
        let mut w = ClockWatch {
            base: Instant::now(),
            offset_ns: 1_000_000_000_000,
        };
        let s = 1_000_000_000i64;
        // Both clocks ten seconds on, with 10 ms of drift: nothing.
        assert_eq!(
            w.observe(1_000_000_000_000 + 10 * s + 10_000_000, 10 * s),
            None
        );
        // Two days asleep: the monotonic clock a second on, the wall clock two days.
        let day = 86_400 * s;
        let jump = w.observe(1_000_000_000_000 + 2 * day + 11 * s, 11 * s);
        let expected = Duration::from_nanos(u64::try_from(2 * day - 10_000_000).unwrap());
        assert_eq!(jump, Some(expected));
        // The wall clock stepped back a minute: nothing.
        assert_eq!(
            w.observe(1_000_000_000_000 + 2 * day - 48 * s, 12 * s),
            None
        );
    }

    /// A burst resolved in order (every slot still held, so nothing to compact) gives back
    /// its room as it drains: it was kept for the producer's life.
    #[test]
    fn pending_gives_back_the_room_of_a_burst_resolved_in_order() {
        let mut p = Pending::default();
        for id in 0..1_000_000u64 {
            p.insert(RecordId(id), Done::Future);
        }
        for id in 0..1_000_000u64 {
            assert!(p.remove(RecordId(id)).is_some());
            let held = p.slots.len().max(Pending::COMPACT_FROM);
            assert!(
                p.slots.capacity() <= 4 * held,
                "{id}: {}",
                p.slots.capacity()
            );
        }
        assert!(p.is_empty());
        assert!(p.slots.capacity() <= 4 * Pending::COMPACT_FROM);
    }

    /// A writer that, like tokio-rustls over a full socket, takes bytes and reports them
    /// written but delivers them only when flushed.
    #[derive(Default)]
    struct HoldsUntilFlushed {
        held: Vec<u8>,
        delivered: Vec<u8>,
    }

    impl AsyncWrite for HoldsUntilFlushed {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            // A few bytes at a time, so that the vectored loop goes round.
            let n = buf.len().min(7);
            self.held.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            let held = std::mem::take(&mut self.held);
            self.delivered.extend_from_slice(&held);
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.poll_flush(cx)
        }
    }

    /// Every queued chunk reaches the peer, in order, before the writer waits for more: the
    /// writes are flushed (before, bytes a TLS stream held back waited for the next request).
    #[tokio::test]
    async fn queued_chunks_are_written_in_order_and_flushed() {
        let mut w = HoldsUntilFlushed::default();
        let mut chunks: Vec<Bytes> = ["request one, ", "", "request two, ", "and its batch"]
            .into_iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        write_all_vectored(&mut w, &mut chunks, Some(Duration::from_secs(1)), None)
            .await
            .unwrap();
        assert!(chunks.is_empty());
        assert!(w.held.is_empty(), "nothing left unflushed");
        assert_eq!(w.delivered, b"request one, request two, and its batch");
    }

    /// Empty chunks alone in the queue (a Produce request's last chunk, taken on its own from
    /// the queue after the rest was written) are nothing to write, not a broken connection:
    /// before, the write of nothing returned 0 and the writer failed with `WriteZero`.
    #[tokio::test]
    async fn empty_chunks_alone_are_written_as_nothing() {
        for queued in [&[""][..], &["", ""], &["", "", "tail"]] {
            let mut w = HoldsUntilFlushed::default();
            let mut chunks: Vec<Bytes> = (queued.iter())
                .map(|s| Bytes::from_static(s.as_bytes()))
                .collect();
            write_all_vectored(&mut w, &mut chunks, Some(Duration::from_secs(1)), None)
                .await
                .unwrap_or_else(|e| panic!("{queued:?}: {e}"));
            assert!(chunks.is_empty());
            assert_eq!(w.delivered, queued.concat().as_bytes(), "{queued:?}");
        }
    }
}
