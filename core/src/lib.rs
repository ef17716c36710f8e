//! kprod-core: a sans-IO Kafka idempotent producer.
//!
//! The [`Producer`] is a pure state machine: it takes records, time, and the bytes read from
//! broker connections, and it emits encoded requests addressed to connections, connect and
//! close commands, deadlines and delivery events. It has no I/O, no clock, no threads and no
//! randomness, and all its state is `Clone + Debug + Eq + Hash`, so a model checker can hold
//! the very producer that ships.
//!
//! # Driver sketch
//!
//! ```no_run
//! use std::time::Instant;
//! use bytes::BytesMut;
//! use kprod_core::{Output, Producer, ProducerConfig, Record};
//!
//! let cfg = ProducerConfig {
//!     bootstrap_servers: vec!["127.0.0.1:9092".into()],
//!     ..Default::default()
//! };
//! let mut producer = Producer::new(cfg, Instant::now()).unwrap();
//! producer.send(Instant::now(), Record::new("events", "hello")).unwrap();
//! loop {
//!     // Drain after every mutation, until Wait.
//!     let until = loop {
//!         match producer.poll_output() {
//!             Output::Connect { conn, addr } => { /* open TCP to addr, later report it */ }
//!             Output::Transmit { conn, bytes } => { /* write bytes to conn */ }
//!             Output::Close { conn } => { /* drop conn */ }
//!             Output::Event(event) => { /* hand to the application */ }
//!             Output::Wait { until } => break until,
//!         }
//!     };
//!     // Wait for socket input or `until`, then feed exactly one input:
//!     // producer.handle_connected(now, conn) / handle_read(now, conn, &mut buf) /
//!     // handle_disconnected(now, conn) / handle_timeout(now) / send(now, record).
//!     # let _ = until;
//!     # break;
//! }
//! ```
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
#[cfg(feature = "mutations")]
pub mod mutation;
mod partition;
pub mod partitioner;
mod producer;
pub mod protocol;
pub mod sasl;
mod types;

pub use config::{ConfigError, DataLossPolicy, GapPolicy, ProducerConfig};
pub use producer::{is_valid_topic_name, Producer};
pub use protocol::compression::{Compression, CompressionType};
pub use protocol::record_batch::Header;
pub use sasl::{SaslConfig, SaslInput, SaslMechanism, SaslNeed, Secret};
pub use types::{
    ConnId, DeliveryError, Diagnostic, Event, FatalError, Output, Persistence, ProducerIdentity,
    Record, RecordId, SendError,
};
