//! kprod-core: a sans-IO Kafka idempotent producer.
//!
//! The [`Producer`] is a pure state machine: it takes records, time, and the bytes read from
//! broker connections, and it emits encoded requests addressed to connections, connect and
//! close commands, deadlines and delivery events. It has no I/O, no clock, no threads and no
//! randomness, and all its state is `Clone + Debug + Eq + Hash`, so a model checker can hold
//! the very producer that ships.
//!
//! A *driver* gives it sockets and time. kprod-tokio is the reference driver; the example
//! `core/examples/blocking.rs` (`cargo run -p kprod-core --example blocking -- ADDR TOPIC`)
//! is a complete one in about 150 lines on plain `std::net::TcpStream`s in non-blocking mode
//! and a poll loop, with no runtime; and kprod-model's `Sim` drives it over an in-memory
//! network in virtual time, which is how to test code around kprod deterministically (see
//! `model/tests/user_simulation.rs`).
//!
//! # Driver sketch
//!
//! ```no_run
//! use std::time::Instant;
//! use kprod_core::{Output, Producer, ProducerConfig, Record};
//!
//! let cfg = ProducerConfig {
//!     bootstrap_servers: vec!["127.0.0.1:9092".into()],
//!     ..Default::default()
//! };
//! let mut producer = Producer::new(cfg, Instant::now()).unwrap();
//! producer.send(Instant::now(), Record::new("events", "hello")).unwrap();
//! loop {
//!     // The drain: after inputs, carry out outputs until Wait.
//!     let until = loop {
//!         match producer.poll_output() {
//!             Output::Connect { conn, addr } => { /* open TCP to addr, report the result */ }
//!             Output::Transmit { conn, bytes } => { /* queue bytes for conn, in order */ }
//!             Output::Close { conn, flush } => { /* write its queue first if flush; drop conn */ }
//!             Output::Event(event) => { /* hand to the application */ }
//!             Output::SaslInput { conn, need } => { /* only with ProducerConfig::sasl */ }
//!             Output::Wait { until } => break until,
//!         }
//!     };
//!     // Wait for socket input or `until`, then feed inputs:
//!     // producer.handle_connected(now, conn) / handle_read(now, conn, &mut buf) /
//!     // handle_disconnected(now, conn) / handle_timeout(now) / send(now, record).
//!     # let _ = until;
//!     # break;
//! }
//! ```
//!
//! # The driver contract
//!
//! ## Inputs
//!
//! Every input takes `now`, an [`Instant`](std::time::Instant) from the driver's clock (real
//! or virtual):
//!
//! - application commands: [`Producer::send`] (accepts a record and returns its
//!   [`RecordId`], or hands it back in a [`SendError`]), [`Producer::flush`],
//!   [`Producer::close`]; [`Producer::precheck`] (the refusals that do not depend on the
//!   buffer's room, for a driver that queues records while it is full); and
//!   [`Producer::abort`], for a driver that meets an error no retry can fix: every record
//!   fails, handed back. A record's `timestamp` goes out as it is: [`Record::new`] leaves it
//!   0 (1970), which time-based retention deletes at once and a broker bounding timestamps
//!   (`message.timestamp.*.ms`) refuses, so a driver stamps records with the wall clock
//!   (kprod-tokio stamps each whose timestamp is 0; the core has no clock);
//! - connection results: [`Producer::handle_connected`] and
//!   [`Producer::handle_connect_failed`], exactly one of them for each `Connect`, under its
//!   [`ConnId`]; [`Producer::handle_connection_refused`] when the transport refuses a
//!   connection for a reason no retry fixes (a rejected certificate);
//! - bytes: [`Producer::handle_read`]`(now, conn, &mut buf)` with a buffer the driver keeps
//!   per connection and appends every byte read to, in order. The producer takes the whole
//!   frames off its front and leaves a partial frame there for the next read;
//! - [`Producer::handle_disconnected`] when a connection reaches end of stream or fails;
//! - [`Producer::handle_timeout`] when the `Wait` deadline has passed;
//! - [`Producer::handle_wall_clock_jump`] when the wall clock moved ahead of the driver's
//!   clock (a suspend, which Linux's and macOS's monotonic clocks do not count), before the
//!   next drain;
//! - [`Producer::handle_writing`]`(now, conn, since)` with
//!   [`ProducerConfig::write_reports`] on: the writer has been writing `conn`'s bytes
//!   without a break since it stood at byte `since` (a slow link): a request after it runs
//!   its request timeout from `now` at the earliest;
//! - [`Producer::handle_sasl_input`] in answer to [`Output::SaslInput`].
//!
//! ## Outputs
//!
//! [`Producer::poll_output`] returns one [`Output`] at a time:
//!
//! - `Connect { conn, addr }`: open a connection to `addr` (`host:port`, and TLS if the
//!   driver does TLS) and report the result. The core keeps the connect timeout
//!   ([`ProducerConfig::connect_timeout`], `socket.connection.setup.timeout.ms`): a connect
//!   still unanswered then gets a `Close` and counts as failed, so the driver needs no timer
//!   of its own (on such a `Close`, cancel the connect, or close its socket when it
//!   completes: the producer has forgotten the connection). Nothing is ever transmitted on a
//!   connection before its `handle_connected`;
//! - `Transmit { conn, bytes }`: write `bytes` to `conn` after every byte of the earlier
//!   `Transmit`s to it. A request may span several consecutive `Transmit`s (record batches
//!   are not copied); a driver that queues them per connection and writes in order needs no
//!   framing. Never write bytes twice, and drop `Transmit`s for a connection that is gone.
//!   Under `acks=0` no request waits for an answer: a batch's [`Event::Sent`] follows the
//!   `Transmit`s that carry it in the same drain, and its memory is freed then, so the
//!   driver's write queue is the only buffer left and the core has no timer that would
//!   notice a dead connection. Such a driver bounds its unwritten bytes (taking no sends
//!   while a connection's exceed a limit) and closes a connection whose writes stall
//!   (kprod-tokio does both);
//! - `Close { conn, flush }`: drop the connection, after writing what was handed over to it
//!   when `flush` says so; do not report `handle_disconnected` for it;
//! - `Event(event)`: for the application. Every accepted record gets exactly one final
//!   outcome: it is one of the records of exactly one [`Event::Delivered`] (one event per
//!   acknowledged batch, [`Delivered::records`] gives each record's offset), or it gets one
//!   [`Event::Failed`] with a truthful [`Persistence`] and the record handed back (with
//!   `acks=0`, one [`Event::Sent`] instead of `Delivered`: handed to the driver, never
//!   acknowledged);
//!   [`Event::Fatal`] and [`Event::Diagnostic`] are notices;
//! - `SaslInput { conn, need }`: a SCRAM nonce or an OAUTHBEARER token (only when
//!   [`ProducerConfig::sasl`] is set);
//! - `Wait { until }`: the end of the drain (below).
//!
//! ## The drain rule
//!
//! After inputs, call `poll_output` until it returns `Wait`, carrying out each output in
//! order. The producer does its work inside the drain: it builds requests, checks its timers
//! and opens connections only there, so a driver must drain before it waits for anything.
//! Feeding inputs inside the drain is allowed (report a connect at once, answer a
//! `SaslInput`), and so is feeding several inputs before one drain: outputs queue in order.
//!
//! ## Time
//!
//! The producer keeps the latest `now` it was given; every input advances it, and
//! `handle_timeout` is simply "time passed". `Wait { until: Some(t) }` asks for a call at
//! or after `t` (an instant on the driver's clock, always later than the latest `now`);
//! calling earlier is harmless. `Wait { until: None }` means nothing is timed: wait for input
//! only. A virtual clock may jump straight to `t`.
//!
//! After a wait, feed what the sockets hold (reads, finished connects) before
//! `handle_timeout`: a timeout acts on what the producer knows then, so a driver that was
//! stalled (a paused process, a blocked thread) past `request.timeout.ms` would time out
//! requests whose answers wait unread, and past `delivery.timeout.ms` fail records the
//! broker acknowledged. [`ProducerConfig::late_wake_grace`] holds timeouts back after a
//! stall for a driver that cannot order its inputs so (kprod-tokio does both).
//!
//! ## When a driver breaks the contract
//!
//! What the code does (kprod-core as of this writing; none of it panics):
//!
//! - **It does not drain**: inputs are still taken and outputs queue without bound, but no
//!   connection is opened, nothing is written and no timer fires. `send` accepts records
//!   until `buffer.memory` is used up, then returns [`SendError::QueueFull`]. Nothing is
//!   lost; nothing moves until the next drain.
//! - **It feeds bytes for a closed or unknown connection**: ignored (the buffer is cleared).
//!   `handle_connected`, `handle_connect_failed` and `handle_disconnected` for an unknown
//!   connection, or reported twice, are ignored too.
//! - **It never answers a `Connect`**: after `connect_timeout` the producer emits `Close` for
//!   it and treats it as a failed connect (reconnect backoff, then the next bootstrap server
//!   or the same broker again); a late `handle_connected` for it is ignored.
//! - **It loses, reorders or invents bytes**: a frame that does not answer the oldest request
//!   in flight, an undecodable response or an impossible frame size makes the producer close
//!   the connection (`Close`, then a [`Diagnostic::Disconnected`] naming the reason) and
//!   retry what was in flight on a new one, as after a disconnect. Dropping a partial frame
//!   left in the `handle_read` buffer has the same effect (at the latest once the request
//!   times out: the stream no longer parses).
//! - **It does not report a disconnect** (or drops `Transmit`s silently): the requests in
//!   flight on the connection time out after `request.timeout.ms`, and the producer closes it
//!   and retries. An idle dead connection is noticed only when its next request times out.
//! - **It moves time backwards**: an earlier `now` is ignored everywhere, `send` included
//!   (a record is stamped with the producer's latest time); the producer's clock never goes
//!   back.
//! - **It jumps time forward** (a suspended machine, a virtual clock): every deadline up to
//!   the new `now` passes at once, as if the time had gone by: requests time out, records
//!   expire.
//! - **It reports a live connection as failed** (`handle_connect_failed` or
//!   `handle_disconnected` for a connection it keeps open): the producer forgets it without a
//!   `Close` and resolves what was in flight; the driver should close the socket.
//!
//! Configuration durations cannot make it panic either: validation adds them saturating,
//! and the producer caps each at [`ProducerConfig::MAX_DURATION`] (100 years, "effectively
//! never"), so `Duration::MAX` in any duration setting is accepted (or refused with a
//! [`ConfigError`] where it breaks a rule, such as `request_timeout` above
//! `delivery_timeout`) and no deadline overflows an `Instant`. A SASL session lifetime from
//! the broker too long to fit an `Instant` means no re-authentication.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Whether the planted bug `$m` (`mutation::Mutation`) is selected in `$cfg` (a config or a
/// send context); always `false` without the `mutations` feature.
macro_rules! mutated {
    ($cfg:expr, $m:ident) => {{
        #[cfg(feature = "mutations")]
        let on = $cfg.mutation == crate::mutation::Mutation::$m;
        #[cfg(not(feature = "mutations"))]
        let on = false;
        on
    }};
}

pub mod config;
pub mod metrics;
#[cfg(feature = "mutations")]
pub mod mutation;
mod partition;
pub mod partitioner;
mod producer;
pub mod protocol;
pub mod sasl;
mod types;

pub use config::{ConfigError, DataLossPolicy, GapPolicy, ProducerConfig};
pub use metrics::{Metrics, PartitionMetrics};
pub use partitioner::Partitioner;
pub use producer::{is_valid_topic_name, CompressedBatch, CompressionTask, Producer};
pub use protocol::compression::{Compression, CompressionType};
pub use protocol::record_batch::Header;
pub use sasl::{SaslConfig, SaslInput, SaslMechanism, SaslNeed, Secret};
pub use types::{
    BrokerDetail, ConnId, Delivered, DeliveryError, Diagnostic, Event, FatalError, Output,
    Persistence, ProducerIdentity, Record, RecordId, SendError, Sent, TopicName,
};
