//! A snapshot of what the producer has done and holds ([`crate::Producer::metrics`]).
//!
//! Counters are history: two producers that will behave the same may have counted different
//! things on the way. They live in a wrapper whose equality and hash ignore the contents,
//! so the producer's `PartialEq`/`Hash` (what the model checker tells states apart by) see
//! only behaviour. The gauges are derived from the state when the snapshot is taken.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use crate::types::{Diagnostic, Event, Persistence};

/// A value kept for observability, not behaviour: every two `Observed` values are equal and
/// hash alike, so holding one in the producer's state never tells two states apart.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Observed<T>(pub(crate) T);

impl<T> PartialEq for Observed<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Observed<T> {}

impl<T> Hash for Observed<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// The producer's counters since it was created.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub(crate) records_accepted: u64,
    pub(crate) records_delivered: u64,
    pub(crate) records_sent_unacknowledged: u64,
    pub(crate) records_failed_not_persisted: u64,
    pub(crate) records_failed_possibly_persisted: u64,
    pub(crate) batches_sent: u64,
    pub(crate) produce_requests: u64,
    pub(crate) retries: u64,
    pub(crate) epoch_bumps: u64,
    pub(crate) producer_ids: u64,
    pub(crate) data_loss: u64,
    pub(crate) produce_throttled: u64,
    pub(crate) metadata_requests: u64,
    pub(crate) batches_compressed_ahead: u64,
    pub(crate) batch_bytes_sent: u64,
    pub(crate) produce_answers: u64,
    pub(crate) produce_latency_total: Duration,
    pub(crate) produce_latency_max: Duration,
    pub(crate) throttle_time_total: Duration,
}

impl Counters {
    /// Counts what an event emitted to the application says happened.
    pub(crate) fn count(&mut self, event: &Event) {
        match event {
            Event::Delivered(d) => self.records_delivered += d.ids.len() as u64,
            Event::Sent(s) => self.records_sent_unacknowledged += s.ids.len() as u64,
            Event::Failed { persisted, .. } => match persisted {
                Persistence::NotPersisted => self.records_failed_not_persisted += 1,
                Persistence::PossiblyPersisted => self.records_failed_possibly_persisted += 1,
            },
            Event::Diagnostic(Diagnostic::Retry { .. }) => self.retries += 1,
            Event::Diagnostic(Diagnostic::EpochBumped(_)) => self.epoch_bumps += 1,
            Event::Diagnostic(Diagnostic::ProducerId(_)) => self.producer_ids += 1,
            Event::Diagnostic(Diagnostic::DataLoss { .. }) => self.data_loss += 1,
            _ => {}
        }
    }
}

/// What the producer has done since it was created (counters) and what it holds now
/// (gauges). Taken with [`crate::Producer::metrics`]; cheap enough to poll every second,
/// though it walks every partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Counter: records accepted by [`crate::Producer::send`] (refused ones are not counted).
    pub records_accepted: u64,
    /// Counter: records acknowledged ([`Event::Delivered`]).
    pub records_delivered: u64,
    /// Counter: `acks=0` records handed to the driver, never acknowledged ([`Event::Sent`]).
    pub records_sent_unacknowledged: u64,
    /// Counter: records failed [`Persistence::NotPersisted`] ([`Event::Failed`]).
    pub records_failed_not_persisted: u64,
    /// Counter: records failed [`Persistence::PossiblyPersisted`].
    pub records_failed_possibly_persisted: u64,
    /// Counter: batch transmissions in Produce requests, first attempts and retries alike.
    pub batches_sent: u64,
    /// Counter: Produce requests written (`batches_sent / produce_requests` is how many
    /// batches a request carried on average).
    pub produce_requests: u64,
    /// Counter: bytes of the record batches in those requests, as on the wire (compressed,
    /// if they are; retries count again): `batch_bytes_sent / batches_sent` is the average
    /// batch size (Java's `batch-size-avg`).
    pub batch_bytes_sent: u64,
    /// Counter: Produce answers read (decoded whole; acks=0 requests have none).
    pub produce_answers: u64,
    /// Counter: the time from each answered Produce request's hand-over to the driver to
    /// its answer, summed: `produce_latency_total / produce_answers` is the average (Java's
    /// `request-latency-avg`, which counts from the send too). It includes the time the
    /// request waited in the connection's queue, the broker's time (for `acks=all`, its
    /// replication) and a throttle the broker held it for.
    pub produce_latency_total: Duration,
    /// The longest of those, since the producer was created.
    pub produce_latency_max: Duration,
    /// Counter: the throttle times brokers left to this client to keep (KIP-219, a quota),
    /// summed over every answer of Produce v6+, Metadata v6+, InitProducerId v1+ and
    /// ApiVersions v2+ that carried one, each at most `delivery.timeout.ms`. (A broker
    /// answering an older version held the answer back itself: not counted, the time is
    /// in the latency.) `produce_throttled` counts the Produce answers among them.
    pub throttle_time_total: Duration,
    /// Counter: batches scheduled for a retry ([`Diagnostic::Retry`]), and batches refused
    /// that wait to be sent again under a new epoch or producer id (no diagnostic: the
    /// epoch bump or the new producer id is reported).
    pub retries: u64,
    /// Counter: local epoch bumps ([`Diagnostic::EpochBumped`], KIP-360).
    pub epoch_bumps: u64,
    /// Counter: producer ids obtained from InitProducerId, the first one included
    /// ([`Diagnostic::ProducerId`]).
    pub producer_ids: u64,
    /// Counter: refusals that proved the broker lost acknowledged records of a partition
    /// ([`Diagnostic::DataLoss`]: an OUT_OF_ORDER_SEQUENCE_NUMBER at the head of a partition
    /// whose log does not start past its last acknowledgement). Counted under either
    /// [`crate::DataLossPolicy`]; under `SignalAndContinue` this and the diagnostic are
    /// how an application learns of the loss.
    pub data_loss_signals: u64,
    /// Counter: batches whose records the driver compressed away from the producer before
    /// their seal ([`crate::Producer::take_compressed`]; kprod-tokio does so, outside the
    /// lock its handles take, for batches of compressed topics that close full, within a
    /// request's worth per drain and an eighth of `buffer.memory` held); the others are
    /// compressed at their seal.
    pub batches_compressed_ahead: u64,
    /// Counter: Produce answers in which the broker throttled this client (a quota,
    /// `throttle_time_ms` > 0, KIP-219): the connection then sends no Produce request until
    /// the throttle has passed.
    pub produce_throttled: u64,
    /// Counter: connections the producer asked the driver to open (`Output::Connect`), the
    /// first ones included: reconnects after a broker closed a connection, a failed
    /// connect, a request timeout or a moved node each add one.
    pub connections_opened: u64,
    /// Counter: metadata requests written (periodic, on a new or idle topic, after an error
    /// that means a leader moved, ...).
    pub metadata_requests: u64,
    /// Gauge: topics left out of metadata requests because nothing was sent to them for a
    /// whole `metadata.max.idle.ms` period (the next record for one names it again).
    pub idle_topics: usize,
    /// Gauge: requests of every kind (Produce, Metadata, InitProducerId, ...) written and
    /// not yet answered, over all connections.
    pub requests_in_flight: usize,
    /// Gauge: of those, Produce requests.
    pub produce_requests_in_flight: usize,
    /// Gauge: records accepted whose outcome is not yet decided (`records_accepted` minus
    /// the delivered, sent-unacknowledged and failed ones, except while an outcome decided
    /// is held behind an earlier record of its partition: it no longer counts here and is
    /// not yet in those counters).
    pub buffered_records: usize,
    /// Gauge: bytes those records hold against `buffer.memory`, and the failed records whose
    /// outcome waits for an earlier record of their partition (handed back with it).
    pub buffered_bytes: usize,
    /// The `buffer.memory` limit: [`crate::Producer::send`] refuses a record that would take
    /// `buffered_bytes` past it.
    pub buffer_memory: usize,
    /// Gauge: records waiting for their topic's metadata (not in any partition yet).
    pub records_awaiting_metadata: usize,
    /// One entry per partition of every topic the producer knows and has not left idle
    /// (`metadata.max.idle.ms`, [`Self::idle_topics`]), by topic and partition. (A partition
    /// gone with a topic created again with fewer partitions is listed only while it still
    /// holds a batch.)
    pub partitions: Vec<PartitionMetrics>,
}

/// One partition in [`Metrics`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionMetrics {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Gauge: records in this partition's batches that are not on the wire: open, ready,
    /// waiting for a retry or for a new producer identity.
    pub queued_records: usize,
    /// Gauge: batches in a Produce request awaiting its answer.
    pub in_flight_batches: usize,
    /// The offset of the last record acknowledged in this partition (history: kept across
    /// epoch bumps), `None` before the first acknowledgement with an offset.
    pub last_acked_offset: Option<i64>,
    /// The sequence number the next new batch gets under the partition's current producer
    /// identity (restarts at 0 when the partition moves to a new identity); -1 without
    /// idempotence, whose batches carry no sequence.
    pub next_sequence: i32,
}
